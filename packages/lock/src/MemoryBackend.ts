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
 * token. Lock clients that share one backend are served as processes sharing a server are: a
 * waiting client registers in the key's line, a release wakes the longest-waiting one at once (no
 * polling), and a free key is kept for it for a claim window, so a client with a steady backlog
 * cannot starve another.
 * Expiry follows Effect's `Clock`, the role a server's clock plays for Redis. Fencing tokens
 * follow the same rule as on a server, `max(last + 1, clock time in microseconds)`, and the last one
 * of each key is kept for `LockScripts.fenceRetentionMillis` after its last acquisition.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  type AcquireReply,
  type Backend,
  LockBackend,
  type Next,
  type ReleaseReply,
  type TransferReply,
  type Wakeups
} from "./LockBackend.ts"
import { observerId } from "./ElectionScripts.ts"
import { fenceRetentionMillis } from "./LockScripts.ts"
import { memoryElections } from "./internal/memoryElections.ts"
import { Mailboxes } from "./internal/memoryMailboxes.ts"
import { MemorySemaphores } from "./internal/memorySemaphores.ts"

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

/** A waiting client's place in a key's line (the line is a `Map` in arrival order). */
interface Registration {
  /** When it lapses unless refreshed by another busy attempt (its client stopped waiting, or died). */
  lapsesAt: number
}

/** How long the head of a line has to take a key a release woke it for (the servers' claim window). */
const claimMillis = 500

/**
 * The clock as the scripts read the server's `TIME`: milliseconds, with the microseconds as their
 * fraction (whole milliseconds under `TestClock`), so that fencing tokens drawn from it are as fine
 * as a server's.
 */
const serverNow: Effect.Effect<number> = Effect.map(Clock.currentTimeNanos, (nanos) => Number(nanos / 1000n) / 1000)

/** `now` (from `serverNow`) in whole microseconds. */
const microsOf = (now: number): number => Math.round(now * 1000)

const fenceSuffix = ":fence"

/** The lock key whose fence key `key` is, if it is one (`LockScripts.fenceKey` appends `:fence`). */
const lockKeyOf = (key: string): string | undefined =>
  key.endsWith(fenceSuffix) ? key.slice(0, -fenceSuffix.length) : undefined

/** `PTTL`'s answer for a key that expires at `expiresAt`. */
const millisLeft = (expiresAt: number, now: number): number =>
  expiresAt === Infinity ? -1 : Math.max(0, Math.ceil(expiresAt - now))

/**
 * A view of an in-memory backend's locks by the names a server would give their keys, for tests that
 * disturb a lock as an operator or another program could on a server: delete a held key (the holder
 * loses it), write another token into it (another owner took it), read who holds it and for how
 * long. Lock keys are `<namespace>:{<key>}` as `LockScripts` names them (`Lock`'s `namespace`
 * option, the key encoded by its codec), fence keys their name with `:fence`. Values follow the
 * server's commands: `get` is the holder's token (a fence key's last token), `pttl` the milliseconds
 * left, `-1` without expiry, `-2` when absent. Semaphores and election records are not in the view.
 *
 * @category models
 * @since 0.2.1
 */
export interface Keys {
  /** The token that holds `key` (`GET`), or `null`. */
  readonly get: (key: string) => Effect.Effect<string | null>
  /** Makes `value` hold `key` for `pxMillis`, or with no expiry (`SET key value [PX ms]`). */
  readonly set: (key: string, value: string, pxMillis?: number) => Effect.Effect<void>
  /** Removes `key` (`DEL`): its holder finds the lock gone at its next renewal or check. */
  readonly del: (key: string) => Effect.Effect<void>
  /** What is left of `key`'s expiry in milliseconds (`PTTL`): `-1` with none, `-2` when absent. */
  readonly pttl: (key: string) => Effect.Effect<number>
}

/**
 * A fresh in-memory backend and the view of its keys.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lock, MemoryBackend } from "@sage/lock"
 * import { LockBackend } from "@sage/lock/LockBackend"
 *
 * // The body is interrupted with LockLost once the key is deleted under it.
 * const program = Effect.gen(function* () {
 *   const { backend, keys } = yield* MemoryBackend.makeWithKeys
 *   const lock = yield* Lock.make({ namespace: "jobs" }).pipe(Effect.provideService(LockBackend, backend))
 *   return yield* lock.withLock("nightly", { waitTimeout: "1 second" })(Effect.andThen(keys.del("jobs:{nightly}"), Effect.never))
 * })
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const makeWithKeys: Effect.Effect<{ readonly backend: Backend; readonly keys: Keys }> = Effect.sync(() => {
  const entries = new Map<string, Entry>()
  const fences = new Map<string, Fence>()
  // The last fencing token issued for `key`, while its record is kept (0 after that).
  const lastFence = (key: string, now: number): number => {
    const previous = fences.get(key)
    return previous !== undefined && previous.expiresAt > now ? previous.last : 0
  }
  const issueFence = (key: string, now: number): number => {
    const fence = Math.max(lastFence(key, now) + 1, microsOf(now))
    // Re-inserted, so the map stays in order of expiry (one retention for all) and `sweep` stops
    // at the first live record.
    fences.delete(key)
    fences.set(key, { last: fence, expiresAt: now + fenceRetentionMillis })
    return fence
  }
  // A renewal keeps the fence for another retention, as the renew script does on a server.
  const keepFence = (key: string, now: number): void => {
    const fence = fences.get(key)
    if (fence === undefined || fence.expiresAt <= now) return
    fences.delete(key)
    fences.set(key, { last: fence.last, expiresAt: now + fenceRetentionMillis })
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

  // Each key's line of waiting clients, as the servers keep it: the first registration keeps its
  // place, lapsed ones are dropped, and a free key belongs to the head.
  const lines = new Map<string, Map<string, Registration>>()
  const mailboxes = new Mailboxes()
  const headOf = (key: string, now: number): string | undefined => {
    const line = lines.get(key)
    if (line === undefined) return undefined
    for (const [id, registration] of line) {
      if (registration.lapsesAt > now) return id
      line.delete(id)
      mailboxes.drop(key, id)
    }
    lines.delete(key)
    return undefined
  }
  const withdraw = (key: string, waiterId: string): boolean => {
    mailboxes.drop(key, waiterId)
    const line = lines.get(key)
    if (line === undefined || !line.delete(waiterId)) return false
    if (line.size === 0) lines.delete(key)
    return true
  }
  const behindHead: Next = { _tag: "Next", claimMillis }
  // The key is free: its head has the claim window to take it, and is told so; the one behind it
  // is told when that window ends, as the servers do.
  const wakeHead = (key: string, now: number): void => {
    const head = headOf(key, now)
    if (head === undefined) return
    const line = lines.get(key)!
    const registration = line.get(head)!
    registration.lapsesAt = Math.min(registration.lapsesAt, now + claimMillis)
    mailboxes.wake(key, head, true)
    for (const [id, next] of line) {
      if (id === head || next.lapsesAt <= now) continue
      mailboxes.wake(key, id, behindHead)
      return
    }
  }

  const semaphores = new MemorySemaphores({
    issueFence: (key, now) => {
      sweep(now)
      return issueFence(key, now)
    },
    lastFence,
    keepFence,
    wake: (key, waiterId) => mailboxes.wake(key, waiterId, true),
    claimMillis
  })

  const wakeups: Wakeups = {
    await: (key, waiterId, millis) => mailboxes.await(key, waiterId, millis),
    leave: (key, waiterId, _timeoutMillis, permits) =>
      Effect.map(serverNow, (now) => {
        if (permits !== undefined) {
          mailboxes.drop(key, waiterId)
          semaphores.leave(key, waiterId, now)
        } else if (withdraw(key, waiterId) && live(key, now) === undefined) wakeHead(key, now)
      })
  }

  const elections = memoryElections({
    now: serverNow,
    held: (key, now) => live(key, now) !== undefined,
    lastFence,
    announce: (key) => mailboxes.wake(key, observerId, true)
  })

  const keys: Keys = {
    get: (key) =>
      Effect.map(serverNow, (now) => {
        const lock = lockKeyOf(key)
        if (lock !== undefined) {
          const fence = lastFence(lock, now)
          return fence === 0 ? null : String(fence)
        }
        return live(key, now)?.token ?? null
      }),
    set: (key, value, pxMillis) =>
      Effect.map(serverNow, (now) => {
        const expiresAt = pxMillis === undefined ? Infinity : now + pxMillis
        const lock = lockKeyOf(key)
        if (lock !== undefined) {
          fences.delete(lock)
          fences.set(lock, { last: Number(value), expiresAt })
          return
        }
        entries.set(key, { token: value, expiresAt, fence: lastFence(key, now) })
      }),
    del: (key) =>
      Effect.sync(() => {
        const lock = lockKeyOf(key)
        if (lock !== undefined) fences.delete(lock)
        else entries.delete(key)
      }),
    pttl: (key) =>
      Effect.map(serverNow, (now) => {
        const lock = lockKeyOf(key)
        if (lock !== undefined) {
          const fence = fences.get(lock)
          return fence === undefined || fence.expiresAt <= now ? -2 : millisLeft(fence.expiresAt, now)
        }
        const entry = live(key, now)
        return entry === undefined ? -2 : millisLeft(entry.expiresAt, now)
      })
  }

  const backend: Backend = {
    description: "in-memory",
    elections,
    ordered: true,
    wakeups,
    acquire: (request) =>
      Effect.map(serverNow, (now): AcquireReply => {
        if (request.permits !== undefined) return semaphores.acquire(request, now)
        const { key } = request
        const waiter = request.waiter?.id
        const entry = live(key, now)
        if (entry !== undefined && entry.token === request.token) {
          entries.set(key, { ...entry, expiresAt: now + request.leaseMillis })
          return { _tag: "Acquired", fence: entry.fence }
        }
        if (entry === undefined) {
          const head = headOf(key, now)
          if (head === undefined || head === waiter) {
            if (waiter !== undefined) withdraw(key, waiter)
            sweep(now)
            const fence = issueFence(key, now)
            entries.set(key, { token: request.token, expiresAt: now + request.leaseMillis, fence })
            return { _tag: "Acquired", fence }
          }
        }
        const remainingMillis = entry === undefined ? -2 : Math.ceil(entry.expiresAt - now)
        if (request.waiter === undefined) return { _tag: "Busy", remainingMillis }
        let line = lines.get(key)
        if (line === undefined) lines.set(key, (line = new Map()))
        const registration = line.get(request.waiter.id)
        if (registration === undefined) line.set(request.waiter.id, { lapsesAt: now + request.waiter.ttlMillis })
        else registration.lapsesAt = now + request.waiter.ttlMillis
        return { _tag: "Busy", remainingMillis, fenceFloor: Math.max(lastFence(key, now), microsOf(now)) }
      }),
    renew: (request) =>
      Effect.map(serverNow, (now) => {
        if (request.permits !== undefined) return semaphores.renew(request, now)
        const entry = live(request.key, now)
        if (entry === undefined || entry.token !== request.token) return false
        entries.set(request.key, { ...entry, expiresAt: now + request.leaseMillis })
        keepFence(request.key, now)
        return true
      }),
    transfer: (request) =>
      Effect.map(serverNow, (now): TransferReply => {
        const entry = live(request.key, now)
        if (entry !== undefined && entry.token === request.successorToken) {
          entries.set(request.key, { ...entry, expiresAt: now + request.leaseMillis })
          return { _tag: "Transferred", fence: entry.fence, othersWaiting: headOf(request.key, now) !== undefined }
        }
        if (entry === undefined || entry.token !== request.token) return { _tag: "NotOwner" }
        sweep(now)
        const fence = issueFence(request.key, now)
        entries.set(request.key, { token: request.successorToken, expiresAt: now + request.leaseMillis, fence })
        // The client's own registration goes with the grant; others still waiting bound its streak.
        if (request.waiter !== undefined) withdraw(request.key, request.waiter.id)
        return { _tag: "Transferred", fence, othersWaiting: headOf(request.key, now) !== undefined }
      }),
    release: (request) =>
      Effect.map(serverNow, (now): ReleaseReply => {
        if (request.permits !== undefined) return semaphores.release(request, now)
        const entry = live(request.key, now)
        // Gone, with no grant since the caller's: nobody else held it in between.
        if (entry === undefined) {
          return request.fence !== undefined && lastFence(request.key, now) === request.fence ? "gone" : false
        }
        if (entry.token !== request.token) return false
        entries.delete(request.key)
        wakeHead(request.key, now)
        return true
      }),
    check: (request) =>
      Effect.map(serverNow, (now) =>
        request.permits !== undefined ? semaphores.check(request, now) : live(request.key, now)?.token === request.token
      )
  }
  return { backend, keys }
})

/**
 * A fresh in-memory backend; each call has its own key space.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: Effect.Effect<Backend> = Effect.map(makeWithKeys, ({ backend }) => backend)

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
