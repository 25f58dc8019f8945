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
 * Expiry follows `Clock.currentTimeMillis`, the role a server's clock plays for Redis. Fencing tokens
 * follow the same rule as on a server, `max(last + 1, clock time in microseconds)`, and the last one
 * of each key is kept for `LockScripts.fenceRetentionMillis` after its last acquisition.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  type AcquireReply,
  type Backend,
  type Elections,
  type ElectionView,
  type LeaderRecord,
  LockBackend,
  type Next,
  type ReleaseReply,
  type TransferReply,
  type Wakeups
} from "./LockBackend.ts"
import { observerId, recordRetentionMillis } from "./ElectionScripts.ts"
import { fenceRetentionMillis } from "./LockScripts.ts"
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

/** Wake-ups of one waiter on one key: fibers waiting for one, or one sent while none waited. */
interface Mailbox {
  readonly waiting: Set<Deferred.Deferred<true | Next>>
  woken: boolean
}

/** How long the head of a line has to take a key a release woke it for (the servers' claim window). */
const claimMillis = 500

const mailboxKey = (key: string, waiterId: string): string => `${key}\u0000${waiterId}`

/**
 * A fresh in-memory backend; each call has its own key space.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: Effect.Effect<Backend> = Effect.sync(() => {
  const entries = new Map<string, Entry>()
  const fences = new Map<string, Fence>()
  // The last fencing token issued for `key`, while its record is kept (0 after that).
  const lastFence = (key: string, now: number): number => {
    const previous = fences.get(key)
    return previous !== undefined && previous.expiresAt > now ? previous.last : 0
  }
  const issueFence = (key: string, now: number): number => {
    const fence = Math.max(lastFence(key, now) + 1, Math.floor(now) * 1000)
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
  const mailboxes = new Map<string, Mailbox>()
  const headOf = (key: string, now: number): string | undefined => {
    const line = lines.get(key)
    if (line === undefined) return undefined
    for (const [id, registration] of line) {
      if (registration.lapsesAt > now) return id
      line.delete(id)
      mailboxes.delete(mailboxKey(key, id))
    }
    lines.delete(key)
    return undefined
  }
  const withdraw = (key: string, waiterId: string): boolean => {
    mailboxes.delete(mailboxKey(key, waiterId))
    const line = lines.get(key)
    if (line === undefined || !line.delete(waiterId)) return false
    if (line.size === 0) lines.delete(key)
    return true
  }
  // A message that finds nobody waiting counts as a wake-up when its waiter next waits.
  const wake = (key: string, waiterId: string, message: true | Next): void => {
    const name = mailboxKey(key, waiterId)
    const mailbox = mailboxes.get(name)
    if (mailbox === undefined || mailbox.waiting.size === 0) {
      mailboxes.set(name, { waiting: new Set(), woken: true })
      return
    }
    // Taken out first: a fiber resumed here may wait again at once, on this same mailbox.
    const waiting = [...mailbox.waiting]
    mailbox.waiting.clear()
    for (const deferred of waiting) Deferred.doneUnsafe(deferred, Exit.succeed(message))
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
    wake(key, head, true)
    for (const [id, next] of line) {
      if (id === head || next.lapsesAt <= now) continue
      wake(key, id, behindHead)
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
    wake: (key, waiterId) => wake(key, waiterId, true),
    claimMillis
  })

  const wakeups: Wakeups = {
    await: (key, waiterId, millis) =>
      Effect.suspend(() => {
        const name = mailboxKey(key, waiterId)
        let mailbox = mailboxes.get(name)
        if (mailbox?.woken === true) {
          mailbox.woken = false
          return Effect.succeed(true)
        }
        if (mailbox === undefined) {
          mailbox = { waiting: new Set(), woken: false }
          mailboxes.set(name, mailbox)
        }
        const waiting = Deferred.makeUnsafe<true | Next>()
        const box = mailbox
        box.waiting.add(waiting)
        return Deferred.await(waiting).pipe(
          Effect.timeoutOption(millis),
          Effect.map(Option.getOrElse((): boolean | Next => false)),
          Effect.ensuring(Effect.sync(() => box.waiting.delete(waiting)))
        )
      }),
    leave: (key, waiterId, _timeoutMillis, permits) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (permits !== undefined) {
          mailboxes.delete(mailboxKey(key, waiterId))
          semaphores.leave(key, waiterId, now)
        } else if (withdraw(key, waiterId) && live(key, now) === undefined) wakeHead(key, now)
      })
  }

  // Elections' leader records, by lock key: a record counts while its term holds the key.
  const records = new Map<string, { readonly record: LeaderRecord; readonly expiresAt: number }>()
  const recordOf = (key: string, now: number): LeaderRecord | undefined => {
    const kept = records.get(key)
    if (kept === undefined) return undefined
    if (kept.expiresAt > now) return kept.record
    records.delete(key)
    return undefined
  }
  const elections: Elections = {
    proclaim: (request) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (live(request.key, now) === undefined || lastFence(request.key, now) !== request.term) return false
        const previous = recordOf(request.key, now)
        const record: LeaderRecord =
          previous !== undefined && previous.term === request.term
            ? { ...previous, value: request.value, revision: previous.revision + 1 }
            : {
                term: request.term,
                candidate: request.candidate,
                value: request.value,
                since: Math.floor(now),
                revision: 1
              }
        records.set(request.key, { record, expiresAt: now + recordRetentionMillis })
        wake(request.key, observerId, true)
        return true
      }),
    read: (key) =>
      Effect.map(Clock.currentTimeMillis, (now): ElectionView => {
        if (live(key, now) === undefined) return { _tag: "Vacant" }
        const term = lastFence(key, now)
        const record = recordOf(key, now)
        return record !== undefined && record.term === term
          ? { _tag: "Leading", record }
          : { _tag: "Unproclaimed", term }
      }),
    announce: (key) => Effect.sync(() => wake(key, observerId, true))
  }

  return {
    description: "in-memory",
    elections,
    ordered: true,
    wakeups,
    acquire: (request) =>
      Effect.map(Clock.currentTimeMillis, (now): AcquireReply => {
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
        const remainingMillis = entry === undefined ? -2 : entry.expiresAt - now
        if (request.waiter === undefined) return { _tag: "Busy", remainingMillis }
        let line = lines.get(key)
        if (line === undefined) lines.set(key, (line = new Map()))
        const registration = line.get(request.waiter.id)
        if (registration === undefined) line.set(request.waiter.id, { lapsesAt: now + request.waiter.ttlMillis })
        else registration.lapsesAt = now + request.waiter.ttlMillis
        return { _tag: "Busy", remainingMillis, fenceFloor: Math.max(lastFence(key, now), Math.floor(now) * 1000) }
      }),
    renew: (request) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        if (request.permits !== undefined) return semaphores.renew(request, now)
        const entry = live(request.key, now)
        if (entry === undefined || entry.token !== request.token) return false
        entries.set(request.key, { ...entry, expiresAt: now + request.leaseMillis })
        keepFence(request.key, now)
        return true
      }),
    transfer: (request) =>
      Effect.map(Clock.currentTimeMillis, (now): TransferReply => {
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
      Effect.map(Clock.currentTimeMillis, (now): ReleaseReply => {
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
      Effect.map(Clock.currentTimeMillis, (now) =>
        request.permits !== undefined ? semaphores.check(request, now) : live(request.key, now)?.token === request.token
      )
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
