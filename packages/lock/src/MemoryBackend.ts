/**
 * An in-process `LockBackend`: locks live in a `Map` inside one process, with leases measured by
 * Effect's `Clock`.
 *
 * **When to use**
 * Tests of code that uses `Lock` (drive lease expiry with `TestClock`, no server needed), and
 * single-process programs that want the same API. It gives no exclusion between processes.
 *
 * **Details**
 * The operations behave as the Redis scripts do: acquire succeeds when the key is free, expired, or
 * already holds the caller's token; renew, transfer, release and check act only for the holder's
 * token.
 * Expiry follows `Clock.currentTimeMillis`, the role a server's clock plays for Redis. Fencing tokens
 * follow the same rule as on a server, `max(last + 1, clock time in microseconds)`, and the last one
 * of each key is kept for `LockScripts.fenceRetentionMillis` after its last acquisition.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type AcquireReply, type Backend, LockBackend, type TransferReply } from "./LockBackend.ts"
import { fenceRetentionMillis } from "./LockScripts.ts"

interface Entry {
  readonly token: string
  readonly expiresAt: number
  /** The fencing token of this grant. */
  readonly fence: number
}

interface Fence {
  readonly last: number
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
  const fences = new Map<string, Fence>()
  const issueFence = (key: string, now: number): number => {
    const previous = fences.get(key)
    const last = previous !== undefined && previous.expiresAt > now ? previous.last : 0
    const fence = Math.max(last + 1, Math.floor(now) * 1000)
    // Re-inserted, so the map stays in order of expiry (one retention for all) and `sweep` stops
    // at the first live record.
    fences.delete(key)
    fences.set(key, { last: fence, expiresAt: now + fenceRetentionMillis })
    return fence
  }
  const sweep = (now: number): void => {
    for (const [key, fence] of fences) {
      if (fence.expiresAt > now) return
      fences.delete(key)
    }
  }
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
    ordered: true,
    acquire: (request) =>
      Effect.map(Clock.currentTimeMillis, (now): AcquireReply => {
        const entry = live(request.key, now)
        if (entry !== undefined && entry.token === request.token) {
          entries.set(request.key, { ...entry, expiresAt: now + request.leaseMillis })
          return { _tag: "Acquired", fence: entry.fence }
        }
        if (entry === undefined) {
          sweep(now)
          const fence = issueFence(request.key, now)
          entries.set(request.key, { token: request.token, expiresAt: now + request.leaseMillis, fence })
          return { _tag: "Acquired", fence }
        }
        return { _tag: "Busy", remainingMillis: entry.expiresAt - now }
      }),
    renew: (request) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = live(request.key, now)
        if (entry === undefined || entry.token !== request.token) return false
        entries.set(request.key, { ...entry, expiresAt: now + request.leaseMillis })
        return true
      }),
    transfer: (request) =>
      Effect.map(Clock.currentTimeMillis, (now): TransferReply => {
        const entry = live(request.key, now)
        if (entry !== undefined && entry.token === request.successorToken) {
          entries.set(request.key, { ...entry, expiresAt: now + request.leaseMillis })
          return { _tag: "Transferred", fence: entry.fence, othersWaiting: false }
        }
        if (entry === undefined || entry.token !== request.token) return { _tag: "NotOwner" }
        sweep(now)
        const fence = issueFence(request.key, now)
        entries.set(request.key, { token: request.successorToken, expiresAt: now + request.leaseMillis, fence })
        return { _tag: "Transferred", fence, othersWaiting: false }
      }),
    release: (request) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = live(request.key, now)
        if (entry === undefined || entry.token !== request.token) return false
        entries.delete(request.key)
        return true
      }),
    check: (request) => Effect.map(Clock.currentTimeMillis, (now) => live(request.key, now)?.token === request.token)
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
