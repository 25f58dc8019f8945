// Batched renewal: one scheduler per lock client renews every lease the client holds.
//
// A fiber and a timer per held lock cost too much at thousands of locks, and one round trip per lock
// per tick floods the server. Instead each client keeps its held leases in one set and a single
// fiber wakes when the next lease is due, and renews every lease due within a short window together:
// the backend sends them in one round trip per node (`renewAll`). Renewing a lease a little early is
// always safe. The fiber lives in the client's scope: with no lease held it waits for the next one
// without a timer, so it never keeps a program alive after its last lock call, and closing the scope
// (the layer) ends it.
//
// The per-lease rules are those of a lone lease: a renewal is due a third of a lease after the last
// successful request was *sent*; the usable lease is counted from that send time, so a slow reply
// shortens it and never stretches it. The scheduler wakes at each lease's end of validity too, so a
// batch that never returns loses each lease exactly when its usable lease is spent, and a reply that
// arrives after that instant loses that lease only. A temporary failure is retried with short
// backoff while the lease's usable time lasts. Loss is reported to the lease's holder (`lost`), which
// interrupts its body; if the scheduler itself ever stops with leases still registered, every one of
// them is lost rather than silently left unrenewed.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import type { Backend, LeaseRequest, Permits, RenewReply } from "../LockBackend.ts"
import { LockLost, type LockRedisError } from "../LockError.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { moreInformative, noReply } from "./failures.ts"
import { type Settings, usableLeaseMillis } from "./settings.ts"
import { type CallTrace, event } from "./tracing.ts"
import { withNow } from "./time.ts"

/**
 * A new lease for the scheduler, granted by a request sent at `held.sentAt` (monotonic ms) for the
 * lock's lease, or for `held.leaseMillis` (a release's grant): renewals then set the lock's lease.
 */
export const lease = (
  settings: Settings,
  held: {
    readonly key: string
    readonly token: string
    readonly sentAt: number
    readonly leaseMillis?: number | undefined
  },
  trace: CallTrace | undefined,
  holder: Holder,
  permits?: Permits | undefined
): Renewal => ({
  key: held.key,
  token: held.token,
  permits,
  trace,
  validUntil:
    held.sentAt + (held.leaseMillis === undefined ? settings.usableLeaseMillis : usableLeaseMillis(held.leaseMillis)),
  nextAt: held.sentAt + (held.leaseMillis === undefined ? settings.renewEveryMillis : Math.floor(held.leaseMillis / 3)),
  failures: 0,
  inFlight: false,
  lastError: undefined,
  active: true,
  holder
})

/**
 * Who holds a lease: told when the lease is lost. An object with a method rather than a callback, so
 * a held lock keeps no closure of its own here (see `locked.ts`).
 */
export interface Holder {
  readonly lost: (error: LockLost) => void
}

/** One held lease, as the scheduler tracks it. */
export interface Renewal {
  readonly key: string
  readonly token: string
  /** A semaphore's permits, when the lease is for them rather than for a lock. */
  readonly permits: Permits | undefined
  /** The span of the call holding the lease, when traced: renewals are recorded on it. */
  readonly trace: CallTrace | undefined
  /** Monotonic time (ms) from which the lease can no longer be relied on. */
  validUntil: number
  /** When the next renewal should be sent. */
  nextAt: number
  failures: number
  inFlight: boolean
  lastError: LockRedisError | undefined
  /** False once unregistered or lost: late replies for it are ignored. */
  active: boolean
  readonly holder: Holder
}

export interface Renewals {
  /**
   * Starts renewing a lease acquired with a request sent at `sentAt`. Synchronous. Once the client's
   * scope has closed, the lease is lost at once (`reason: "failed"`): nothing would renew it.
   */
  readonly register: (renewal: Renewal) => void
  /** Stops renewing (the body ended). Idempotent. */
  readonly unregister: (renewal: Renewal) => void
  /**
   * Reports a loss found outside the scheduler (a lease check the server answered "not held"), as
   * a failed renewal would: the lease stops renewing and its holder is told. Ignored once inactive.
   */
  readonly lose: (renewal: Renewal, reason: "ownership") => void
  /** How many leases are being renewed (tests and metrics). */
  readonly size: () => number
}

const retryPolicy = (settings: Settings): BackoffPolicy => ({
  baseMillis: Math.min(25, settings.leaseMillis / 20),
  capMillis: Math.max(5, settings.leaseMillis / 6)
})

/**
 * The client's scheduler. Its fiber is forked into the client's scope at once and ends when the
 * scope closes; every lease still registered then is lost (`reason: "failed"`), never left unrenewed.
 */
export const make = (backend: Backend, settings: Settings): Effect.Effect<Renewals, never, Scope.Scope> =>
  Effect.suspend(() => {
    const scheduler = new Scheduler(backend, settings)
    return Effect.as(
      Effect.forkScoped(Effect.ensuring(scheduler.loop, scheduler.stopped), { startImmediately: true }),
      scheduler
    )
  })

/**
 * The scheduler's state and its steps as methods: one object a client. Replies are settled in plain
 * loops over the batch, since a tick of 10,000 leases must not cost an Effect per lease.
 */
class Scheduler implements Renewals {
  readonly leases = new Set<Renewal>()
  readonly policy: BackoffPolicy
  /** Leases due within this window of the earliest one are renewed in the same batch. */
  readonly window: number
  /** Set once the scheduler's fiber has ended (its scope closed): nothing renews any more. */
  closed = false
  sleepingUntil = Infinity
  wake: Deferred.Deferred<void> | undefined = undefined
  readonly backend: Backend
  readonly settings: Settings
  /** The loop, as one Effect made once. */
  readonly loop: Effect.Effect<never>
  /** Run when the loop ends: every lease still registered is lost. */
  readonly stopped: Effect.Effect<void>

  constructor(backend: Backend, settings: Settings) {
    this.backend = backend
    this.settings = settings
    this.policy = retryPolicy(settings)
    this.window = Math.floor(settings.renewEveryMillis / 4)
    // No yield between turns: a turn that sleeps yields once after it wakes (see `tick`), and one that
    // sends a batch goes straight on to the next scan.
    this.loop = Effect.forever(
      withNow((now) => this.tick(now)),
      { disableYield: true }
    )
    this.stopped = Effect.sync(() => {
      this.closed = true
      this.sleepingUntil = Infinity
      this.wake = undefined
      for (const renewal of this.leases) this.lose(renewal, "failed")
    })
  }

  register(renewal: Renewal): void {
    if (this.closed) return this.lose(renewal, "failed")
    this.leases.add(renewal)
    this.signal(renewal.nextAt, renewal.validUntil)
  }

  unregister(renewal: Renewal): void {
    renewal.active = false
    this.leases.delete(renewal)
    // The last lease left: the loop drops its timer now rather than when it would have renewed.
    if (this.leases.size === 0 && this.sleepingUntil !== Infinity) this.signal(-Infinity, -Infinity)
  }

  size(): number {
    return this.leases.size
  }

  /**
   * Wakes the sleeping loop when something needs it before it planned to wake. A renewal due only
   * slightly earlier (within the batching window) waits for the planned wake-up: renewing a little
   * late still leaves more than half a lease of margin, and it keeps a burst of new leases from
   * waking the loop once each. A lease with less margin than that (a release's grant, counted from
   * the waiter's last busy attempt, is due at once and usable for a few hundred milliseconds at
   * most) may be late by a quarter of what it has left after its due time, never by the window.
   */
  signal(renewAt: number, validUntil: number): void {
    if (this.wake === undefined) return
    const margin = validUntil - renewAt
    const late = margin < 4 * this.window ? margin / 4 : this.window
    if (renewAt + late < this.sleepingUntil || validUntil < this.sleepingUntil)
      Deferred.doneUnsafe(this.wake, Exit.void)
  }

  lose(renewal: Renewal, reason: "ownership" | "expired" | "failed", cause?: LockRedisError): void {
    if (!renewal.active) return
    renewal.active = false
    this.leases.delete(renewal)
    renewal.holder.lost(
      new LockLost({
        key: renewal.key,
        namespace: this.settings.namespace,
        phase: "renew",
        reason,
        bodyCompleted: false,
        ...(cause === undefined ? {} : { cause })
      })
    )
  }

  /**
   * One turn of the loop: leases past their validity are lost; due ones are sent as a batch (in a
   * fiber of their own, so the loop goes on); otherwise it sleeps until the next is due or ends, or
   * until signalled. With no lease held it waits on the `Deferred` alone: a fiber suspended there
   * holds no timer, so an idle client never keeps its program alive.
   */
  tick(now: number): Effect.Effect<void> {
    let wakeAt = Infinity
    let due = Infinity
    for (const renewal of this.leases) {
      if (now >= renewal.validUntil) {
        // What was left of the lease when its renewal fell due: the lock's usable lease less a
        // renewal period, or much less for a release's grant (its claim window, from the busy attempt).
        const left = Math.max(0, renewal.validUntil - renewal.nextAt)
        this.lose(renewal, "expired", renewal.lastError ?? noReply("renew", left))
        continue
      }
      wakeAt = Math.min(wakeAt, renewal.validUntil)
      if (!renewal.inFlight) due = Math.min(due, renewal.nextAt)
    }
    if (due <= now) {
      const batch: Array<Renewal> = []
      for (const renewal of this.leases) {
        if (!renewal.inFlight && renewal.nextAt <= now + this.window) {
          renewal.inFlight = true
          batch.push(renewal)
        }
      }
      return Effect.asVoid(Effect.forkChild(this.send(batch, now), { startImmediately: true }))
    }
    wakeAt = Math.min(wakeAt, due)
    this.sleepingUntil = wakeAt
    const wake = (this.wake = Deferred.makeUnsafe<void>())
    const sleep =
      wakeAt === Infinity
        ? Deferred.await(wake)
        : Effect.asVoid(Effect.timeoutOption(Deferred.await(wake), wakeAt - now))
    return Effect.andThen(
      sleep,
      Effect.andThen(
        Effect.sync(() => {
          this.sleepingUntil = Infinity
          this.wake = undefined
        }),
        // Let every fiber already scheduled (replies, new leases) run first: one scan serves them all.
        Effect.yieldNow
      )
    )
  }

  renewBatch(batch: ReadonlyArray<Renewal>, timeoutMillis: number): Effect.Effect<ReadonlyArray<RenewReply>> {
    const { backend, settings } = this
    const requests = batch.map((renewal): LeaseRequest => ({
      key: renewal.key,
      token: renewal.token,
      leaseMillis: settings.leaseMillis,
      timeoutMillis,
      acknowledge: settings.replicaAcknowledgement,
      permits: renewal.permits
    }))
    if (backend.renewAll !== undefined) return backend.renewAll(requests)
    return Effect.forEach(
      requests,
      (request) => Effect.match(backend.renew(request), { onFailure: (error) => error, onSuccess: (ok) => ok }),
      { concurrency: "unbounded" }
    )
  }

  /** What one reply means for its lease: renewed, lost (both settled here), or to be retried (`true`). */
  settle(renewal: Renewal, reply: RenewReply | undefined, sentAt: number, receivedAt: number): boolean {
    if (!renewal.active) return false
    renewal.inFlight = false
    if (receivedAt >= renewal.validUntil) {
      this.lose(renewal, "expired", renewal.lastError ?? noReply("renew", renewal.validUntil - sentAt))
      return false
    }
    if (reply === true) {
      if (renewal.trace !== undefined) {
        event(renewal.trace, "lock.renewed", { "lock.renew.round_trip_ms": receivedAt - sentAt })
      }
      renewal.validUntil = sentAt + this.settings.usableLeaseMillis
      renewal.nextAt = sentAt + this.settings.renewEveryMillis
      renewal.failures = 0
      renewal.lastError = undefined
      return false
    }
    if (reply === false) {
      this.lose(renewal, "ownership")
      return false
    }
    const error = reply ?? noReply("renew", receivedAt - sentAt)
    if (!error.retryable) {
      this.lose(renewal, "failed", error)
      return false
    }
    renewal.lastError = moreInformative(renewal.lastError, error)
    event(renewal.trace, "lock.renew.retry", { "lock.error.code": error.code })
    return true
  }

  /** A temporary failure: the lease is retried after a short backoff, within its usable time. */
  retryLater(renewal: Renewal, receivedAt: number): Effect.Effect<void> {
    return Effect.map(nextDelay(this.policy, renewal.failures++, renewal.validUntil - receivedAt), (delay) => {
      renewal.nextAt = receivedAt + delay
    })
  }

  send(batch: ReadonlyArray<Renewal>, sentAt: number): Effect.Effect<void> {
    let longest = 0
    for (const renewal of batch) longest = Math.max(longest, renewal.validUntil - sentAt)
    // One attempt waits at most a renewal period: a reply that never comes (a connection gone
    // silent) leaves time for another attempt within the lease instead of using all of it.
    return Effect.flatMap(this.renewBatch(batch, Math.min(longest, this.settings.renewEveryMillis)), (replies) =>
      withNow((receivedAt) => {
        let retries: Array<Renewal> | undefined
        for (let i = 0; i < batch.length; i++) {
          const renewal = batch[i]!
          if (this.settle(renewal, replies[i], sentAt, receivedAt)) (retries ??= []).push(renewal)
        }
        const woken = Effect.sync(() => this.signal(-Infinity, -Infinity))
        if (retries === undefined) return woken
        return Effect.andThen(
          Effect.forEach(retries, (renewal) => this.retryLater(renewal, receivedAt), { discard: true }),
          woken
        )
      })
    )
  }
}
