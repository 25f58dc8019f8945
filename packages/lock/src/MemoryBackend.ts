/**
 * An in-process `LockBackend`: locks live in a `Map` inside one process, with leases measured by
 * Effect's `Clock`.
 *
 * **When to use**
 * Tests of code that uses `Lock` (drive lease expiry with `TestClock`, no server needed), and
 * single-process programs that want the same API. It gives no exclusion between processes.
 *
 * **Details**
 * The three operations behave as the Redis scripts do: acquire succeeds when the key is free,
 * expired, or already holds the caller's token; renew and release act only for the holder's token.
 * Expiry follows `Clock.currentTimeMillis`, the role a server's clock plays for Redis.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type AcquireReply, type Backend, LockBackend } from "./LockBackend.ts"

interface Entry {
  readonly token: string
  readonly expiresAt: number
}

/**
 * A fresh in-memory backend; each call has its own key space.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: Effect.Effect<Backend> = Effect.sync(() => {
  const entries = new Map<string, Entry>()
  const live = (key: string, now: number): Entry | undefined => {
    const entry = entries.get(key)
    if (entry !== undefined && entry.expiresAt <= now) {
      entries.delete(key)
      return undefined
    }
    return entry
  }
  return {
    description: "in-memory",
    acquire: (request) =>
      Effect.map(Clock.currentTimeMillis, (now): AcquireReply => {
        const entry = live(request.key, now)
        if (entry === undefined || entry.token === request.token) {
          entries.set(request.key, { token: request.token, expiresAt: now + request.leaseMillis })
          return { _tag: "Acquired" }
        }
        return { _tag: "Busy", remainingMillis: entry.expiresAt - now }
      }),
    renew: (request) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = live(request.key, now)
        if (entry === undefined || entry.token !== request.token) return false
        entries.set(request.key, { token: request.token, expiresAt: now + request.leaseMillis })
        return true
      }),
    release: (request) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = live(request.key, now)
        if (entry === undefined || entry.token !== request.token) return false
        entries.delete(request.key)
        return true
      })
  }
})

/**
 * The in-memory backend as a layer: every lock client built over it shares one key space.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Lock, MemoryBackend } from "@sage/lock"
 *
 * const TestLock = Lock.layer({ leaseDuration: "1 second" }).pipe(Layer.provide(MemoryBackend.layer))
 * const program = Lock.withLock("job", { waitTimeout: "1 second" })(Effect.succeed(1))
 * // Effect.provide(program, TestLock) runs without any server
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<LockBackend> = Layer.effect(LockBackend, make)
