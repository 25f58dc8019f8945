// Acquisition: attempts, backoff, the deadline, and cleanup of attempts whose outcome is unknown.
//
// The budget covers everything: server replies, retry delays, and the attempt in flight, which is
// abandoned at the deadline. An attempt whose outcome is unknown (timed out, or failed after it may
// have executed) leaves the lock "uncertain": the next attempt settles it (the acquire script is
// idempotent for our own token), and if none does, a bounded release runs before the call returns,
// so nothing is left held beyond its lease.
//
// A waiter registered at the server may be handed the lock by a release (a granting backend): it then
// holds the key the release wrote, for the release's claim window counted from the send time of its
// last busy attempt (the release ran after that attempt), and renews it to its own lease like every
// other lease.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { AcquireReply, Backend, Granted, LeaseRequest, Next, Wakeups } from "../LockBackend.ts"
import { type InvalidArgument, LockLost, type LockRedisError, TimedOut } from "../LockError.ts"
import type { AttemptSlots, SlotHolder } from "./attemptSlots.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { moreInformative } from "./failures.ts"
import { releaseBounded } from "./release.ts"
import { invalid, releaseTimeoutMillis, type Settings, usableLeaseMillis } from "./settings.ts"
import { monotonicMillis, withNow } from "./time.ts"
import { annotate, event } from "./tracing.ts"
import { attemptAttributes, grantedAttempt, outcomeAttributes } from "./acquireTrace.ts"
import type { AcquireOutcome, AcquireParams } from "./acquisition.ts"

/** A waiter's registration, as an acquire request carries it. */
type Waiter = NonNullable<LeaseRequest["waiter"]>

/** Backoff while waiting for a busy lock: 10 ms doubling up to 1 s (or a fifth of the lease). */
const waitPolicy = (settings: Settings): BackoffPolicy => ({
  baseMillis: Math.min(10, settings.leaseMillis / 10),
  capMillis: Math.min(1_000, Math.max(20, settings.leaseMillis / 5))
})

/**
 * With wake-ups, a waiter sleeps until a release names it, and polls only as a safety net: after a
 * random 50-100% of the backoff cap (a lost message costs at most that). Its registration at the
 * server lasts two caps plus half a second between refreshes, so a live waiter never lapses while a
 * dead one stops holding up the line soon after.
 */
const registrationMillis = (policy: BackoffPolicy): number => 2 * policy.capMillis + 500

/**
 * The time limit of a first attempt sent after the call's budget ran out (see `attemptAt`): one
 * millisecond, the shortest limit the node-redis backend keeps, enough for a reply on a local network.
 */
const lateFirstAttemptMillis = 1

/**
 * Attempts until acquired, busy (`try`), the deadline, or a permanent failure. Written as a chain
 * of plain continuations rather than a generator: the uncontended case is one backend call.
 *
 * The acquisition starts when this is called (its first attempt's send time is read here), so call
 * it when the returned effect is to run at once, once: a locked call does, at its start.
 */
export const acquire = (
  params: AcquireParams
): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> => {
  const acquisition = new Acquisition(params)
  // `onExitPrimitive`, not `onExit`: a finalizer that has nothing to run answers `undefined`, and the
  // exit passes straight on. With `onExit`, the `Effect.void` of a held lock's (empty) cleanup
  // costs three more Effect steps on every call.
  return Effect.onExitPrimitive(acquisition.attemptAt(monotonicMillis(params.clock)), (exit) =>
    acquisition.settle(exit)
  )
}

/**
 * One acquisition's state, and its steps as methods: one object a call, where closures over the
 * same state made about 1.7 KB of garbage a call even when the first attempt succeeded (all but
 * the first attempt's continuations are needed only when the key is busy or the server fails).
 */
class Acquisition implements SlotHolder {
  readonly backend: Backend
  readonly settings: Settings
  readonly key: string
  readonly token: string
  readonly deadline: number
  readonly clock: Clock.Clock
  readonly params: AcquireParams
  /** The wake-ups of the backend, when this acquisition waits and may register at the server. */
  readonly wakeups: Wakeups | undefined
  /** This acquisition's registration at the server, when it may register. */
  readonly waiter: Waiter | undefined
  /** The key may hold this acquisition's token: giving up must release it. */
  uncertain: boolean
  /** The fence of a grant of this client that may still be held at the server (`retake`). */
  staleFence: number | undefined
  attempts = 0
  lastError: LockRedisError | undefined = undefined
  lastBusy: boolean
  policy: BackoffPolicy | undefined = undefined
  /** A busy reply registered this acquisition's waiter at the server: it waits for wake-ups. */
  registered = false
  /**
   * An attempt carrying the waiter id was sent: the server may have registered it even though no
   * reply said so (the attempt timed out, or the call was interrupted with it on the wire), so
   * giving up withdraws it, or a release could hand the lock to a waiter that is gone.
   */
  mayBeRegistered = false
  /** Whether `params.unavailable` was last told of a failure (so the hot path tells it nothing). */
  reportedUnavailable = false
  /**
   * The send time of the last busy attempt that registered the waiter, and the highest fence
   * issued before it ran: a grant is relied on only if it is newer than both.
   */
  busySentAt = 0
  fenceFloor: number | undefined = undefined
  /** Whether this acquisition holds one of the client's attempt slots (see `attemptSlots.ts`). */
  slot = false
  /** The slots stalled while this acquisition waited for one: its next attempt goes without. */
  unslotted = false
  /** The retry step, made the first time it is needed. */
  private retry: Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> | undefined =
    undefined

  constructor(params: AcquireParams) {
    this.params = params
    this.backend = params.backend
    this.settings = params.settings
    this.key = params.key
    this.token = params.token
    this.deadline = params.deadline
    this.clock = params.clock
    this.uncertain = params.uncertain === true
    this.staleFence = params.staleFence
    this.lastBusy = params.waitedBehind
    const waits = params.mode === "wait" && params.waiterId !== undefined
    const wakeups = waits ? params.backend.wakeups : undefined
    this.wakeups = wakeups
    // A lock's waiter registers only where releases can wake it; a semaphore's always does, polling
    // without wake-ups: its place in the line is what keeps a large request from being overtaken.
    if (wakeups === undefined && !(waits && params.permits !== undefined)) this.waiter = undefined
    else {
      this.policy = waitPolicy(params.settings)
      this.waiter = { id: params.waiterId!, ttlMillis: registrationMillis(this.policy) }
    }
  }

  available(): void {
    if (this.reportedUnavailable) {
      this.reportedUnavailable = false
      this.params.unavailable?.(this.key, undefined)
    }
  }

  request(timeoutMillis: number): LeaseRequest {
    return {
      key: this.key,
      token: this.token,
      leaseMillis: this.settings.leaseMillis,
      timeoutMillis,
      acknowledge: this.settings.replicaAcknowledgement,
      waiter: this.waiter,
      permits: this.params.permits
    }
  }

  lost(reason: "expired" | "not-master"): LockLost {
    return new LockLost({
      key: this.key,
      namespace: this.settings.namespace,
      phase: "acquire",
      reason,
      bodyCompleted: false
    })
  }

  timedOut(): Effect.Effect<never, TimedOut> {
    return withNow((end) =>
      Effect.fail(
        new TimedOut({
          key: this.key,
          namespace: this.settings.namespace,
          waitedMillis: Math.round(end - this.params.startedAt),
          attempts: this.attempts,
          reason: this.lastBusy ? "busy" : this.lastError?.code === "UNACKNOWLEDGED" ? "unacknowledged" : "unavailable",
          ...(this.lastError === undefined || this.lastBusy ? {} : { lastError: this.lastError })
        })
      )
    )
  }

  /** Another attempt, sent when it runs. */
  attempt(): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    return (this.retry ??= Effect.suspend(() => this.attemptAt(monotonicMillis(this.clock))))
  }

  retryAfter(
    holderRemainingMillis?: number
  ): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    return withNow((now) => {
      const policy = (this.policy ??= waitPolicy(this.settings))
      const wakeups = this.wakeups
      if (wakeups !== undefined && this.registered) {
        // Registered at the server: wait until a release names this waiter, polling only as a
        // safety net (the exponent 30 means "at the cap").
        return Effect.flatMap(nextDelay(policy, 30, this.deadline - now, holderRemainingMillis), (delay) => {
          event(this.params.trace, "lock.wait", { "lock.wait.until": "wake-up", "lock.wait.max_ms": delay })
          return Effect.flatMap(wakeups.await(this.key, this.waiter!.id, delay), (woken) => this.woken(woken))
        })
      }
      return Effect.flatMap(
        nextDelay(policy, this.attempts - 1, this.deadline - now, holderRemainingMillis),
        (delay) => {
          event(this.params.trace, "lock.wait", { "lock.wait.until": "backoff", "lock.wait.max_ms": delay })
          return Effect.andThen(Effect.sleep(delay), this.attempt())
        }
      )
    })
  }

  /** What a wait for a wake-up ended with: a grant, the waiter ahead served, or time to try. */
  woken(
    woken: boolean | Granted | Next
  ): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    if (typeof woken !== "object") return this.attempt()
    return woken._tag === "Granted" ? this.granted(woken) : this.behindServed(woken)
  }

  /**
   * The waiter ahead was just served. Should it never take the lock (its process died), the turn
   * is this waiter's when the claim window ends: it waits that long (for a grant or a wake-up
   * meanwhile, as before), then asks, rather than at its next safety-net poll.
   */
  behindServed(next: Next): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    return withNow((now) => {
      const delay = Math.max(0, Math.min(next.claimMillis + 1, this.deadline - now))
      event(this.params.trace, "lock.wait", { "lock.wait.until": "claim-window", "lock.wait.max_ms": delay })
      return Effect.flatMap(this.wakeups!.await(this.key, this.waiter!.id, delay), (woken) => this.woken(woken))
    })
  }

  /**
   * A release handed the key to this waiter. It holds it from the release until the grant's window
   * ends, if the grant is not an old one (its fence is above the floor). When did the release run?
   * After the busy attempt (sent at `busySentAt`), and by as much as the server's clock moved between
   * the two: the floor the busy reply gave is the server's time then (in whole milliseconds, as
   * microseconds), and the grant's fence is its time at the release (both are fencing tokens, which
   * follow the server's clock). So the grant counts from `busySentAt` plus that difference less a
   * millisecond (the floor's rounding); a date after now (the server's clock ran ahead of this
   * one) is not trusted, and the grant counts from `busySentAt`. When the tokens run ahead of the clock
   * (the fence key above the server's time), the difference counts issued tokens, not time, and the
   * grant counts from about `busySentAt`, as it always did. A clock that jumps forward shortens
   * every lease on the server alike; the safety margin covers drift, not jumps.
   *
   * Taken as it comes only while two thirds of the window's usable part are left (about 300 ms of
   * a 500 ms window), all of it for the first renewal's round trip, so that a stall of the process
   * shorter than that cannot stop the body with `LockLost`. Otherwise an attempt takes the key with
   * a full lease (the acquire script converts a grant to its waiter): one round trip more. The same
   * attempt runs when the message came before the busy reply or a grant is in doubt.
   */
  granted(grant: Granted): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    return withNow((now) => {
      const floor = this.fenceFloor
      if (floor === undefined || grant.fence <= floor) return this.attempt()
      const dated = this.busySentAt + Math.max(0, (grant.fence - floor) / 1000 - 1)
      // Dated after the message came: the server's clock ran ahead of this one (a jump); not trusted.
      const grantedAt = dated <= now ? dated : this.busySentAt
      if (now - grantedAt >= usableLeaseMillis(grant.leaseMillis) / 3) return this.attempt()
      event(this.params.trace, "lock.attempt", grantedAttempt)
      return Effect.succeed<AcquireOutcome>({
        _tag: "Held",
        lease: {
          key: this.key,
          token: grant.token,
          sentAt: grantedAt,
          fence: grant.fence,
          leaseMillis: grant.leaseMillis
        }
      })
    })
  }

  /**
   * One attempt, sent now (`sentAt`): the first runs at once, retries through `attempt`. The first is
   * sent even when the budget is already spent: a `waitTimeout` shorter than the time between the
   * call and its first attempt (a microsecond, say) asks for one attempt, as `tryWithLock` does,
   * rather than a `TimedOut` that tried nothing. It then gets `lateFirstAttemptMillis`.
   */
  attemptAt(sentAt: number): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    const remaining = this.deadline - sentAt
    if (remaining <= 0 && this.attempts > 0) return this.timedOut()
    const slots = this.params.slots
    if (slots !== undefined && !this.unslotted && !slots.take(this)) return this.awaitSlot(slots, remaining)
    this.unslotted = false
    this.attempts++
    if (this.waiter !== undefined) this.mayBeRegistered = true
    // Only a grant made after a busy reply, with no attempt since, can be taken as it comes.
    this.fenceFloor = undefined
    const before = this.uncertain
    this.uncertain = true
    // A grant that takes longer than the usable lease could not be relied on anyway.
    const attemptMillis = remaining > 0 ? Math.min(remaining, this.settings.usableLeaseMillis) : lateFirstAttemptMillis
    return Effect.matchEffect(this.backend.acquire(this.request(attemptMillis)), {
      onFailure: (error) => this.failed(error, before),
      onSuccess: (reply) => this.replied(reply, sentAt)
    })
  }

  /**
   * Every slot is taken: wait for one (not sent yet, so no lease is running), then attempt, or time
   * out at the deadline. If the slots stall (no reply for `stallMillis`), attempt without one. A first attempt whose budget is already spent waits as long as it would
   * have waited for its reply.
   */
  awaitSlot(
    slots: AttemptSlots,
    remaining: number
  ): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    event(this.params.trace, "lock.wait", { "lock.wait.until": "attempt-slot", "lock.wait.max_ms": remaining })
    return Effect.flatMap(slots.wait(this, Math.max(remaining, lateFirstAttemptMillis)), (outcome) => {
      if (outcome === "timedOut") return this.timedOut()
      this.unslotted = outcome === "stalled"
      return this.attempt()
    })
  }

  failed(
    error: LockRedisError,
    before: boolean
  ): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    this.params.slots?.give(this)
    event(this.params.trace, "lock.attempt", { "lock.attempt": this.attempts, "lock.attempt.result": error.code })
    if (!error.mayHaveExecuted) this.uncertain = before
    if (!error.retryable) return Effect.fail(error)
    // A bare timeout after a busy reply says nothing new about the server, so it does not
    // turn a "busy" timeout into an "unavailable" one.
    if (!(this.lastBusy && error.kind === "timeout")) {
      this.lastError = moreInformative(this.lastError, error)
      this.lastBusy = false
      if (this.params.unavailable !== undefined) {
        this.reportedUnavailable = true
        this.params.unavailable(this.key, this.lastError)
      }
    }
    return this.retryAfter()
  }

  replied(
    reply: AcquireReply,
    sentAt: number
  ): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    this.params.slots?.give(this)
    this.available()
    if (this.params.trace !== undefined)
      event(this.params.trace, "lock.attempt", attemptAttributes(this.attempts, reply))
    if (reply._tag === "Acquired" && reply.fence === this.staleFence) return this.retake()
    if (reply._tag === "Acquired") {
      // The grant arrived after the usable lease was spent: another process may already be
      // entitled to the key. The body must not start; the cleanup releases our write.
      if (monotonicMillis(this.clock) >= sentAt + this.settings.usableLeaseMillis)
        return Effect.fail(this.lost("expired"))
      // `uncertain` stays set: should an interruption end the acquisition before this outcome
      // is delivered, the cleanup releases the lock. A delivered `Held` needs no cleanup.
      return Effect.succeed<AcquireOutcome>({
        _tag: "Held",
        lease: { key: this.key, token: this.token, sentAt, fence: reply.fence }
      })
    }
    // The write landed on a node that is not (or no longer) the master: a failover may drop
    // it, or grant the key to someone else. The body must not start; cleanup releases it.
    if (reply._tag === "NotMaster") return Effect.fail(this.lost("not-master"))
    if (reply._tag === "LimitConflict") {
      this.uncertain = false
      return Effect.fail(
        invalid(
          "limit",
          this.params.permits?.limit,
          `the semaphore is in use with limit ${reply.limit}: every caller of one semaphore must give the same limit`
        )
      )
    }
    this.uncertain = false
    if (this.params.mode === "try") return Effect.succeed<AcquireOutcome>(busyOutcome)
    this.lastBusy = true
    if (this.waiter !== undefined) {
      this.registered = true
      this.busySentAt = sentAt
      this.fenceFloor = reply.fenceFloor
    }
    return this.retryAfter(reply.remainingMillis)
  }

  /**
   * The attempt took a grant of this client whose release had failed (`staleFence`): a new holder
   * must not have its fencing token. The key now holds this acquisition's token: released (within
   * the release's bound), then asked for again, it comes with a new fence.
   */
  retake(): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument> {
    // Once: should the release fail too, the next answer is the key as it stands, this token's.
    this.staleFence = undefined
    return Effect.andThen(
      releaseBounded(this.backend, (timeoutMillis) => this.request(timeoutMillis), "a stale grant taken again"),
      Effect.suspend(() => this.attempt())
    )
  }

  /** How the acquisition ended: told to the caller, recorded on the span, and cleaned up after. */
  settle(
    exit: Exit.Exit<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument>
  ): Effect.Effect<void> | undefined {
    // Interrupted with an attempt on the wire, or with a slot handed to it while it waited.
    this.params.slots?.give(this)
    this.available()
    this.params.caller.settled(exit, monotonicMillis(this.clock))
    if (this.params.trace !== undefined) annotate(this.params.trace, outcomeAttributes(exit))
    return this.cleanup(exit)
  }

  cleanup(
    exit: Exit.Exit<AcquireOutcome, TimedOut | LockLost | LockRedisError | InvalidArgument>
  ): Effect.Effect<void> | undefined {
    if (Exit.isSuccess(exit) && exit.value._tag === "Held") return undefined
    const release = this.uncertain
      ? releaseBounded(this.backend, (timeoutMillis) => this.request(timeoutMillis), "abandoned acquisition")
      : undefined
    // Giving up: withdraw from the server's line (where a busy reply put this waiter, or an attempt
    // whose reply never came may have), unless another fiber of this client takes over the same
    // registration (same waiter id) for this key. Both run at once, so the cleanup stays within
    // one second in all (one after the other they could take two): each is safe in either order,
    // since a release wakes the next waiter itself and leaving wakes one only if the key is free.
    // Over one pipelined connection the withdrawal reaches the server after any attempt still on
    // the wire; where it could overtake one, the registration left behind lapses, and a release
    // that serves it tells the next waiter when to ask (see `behindServed`).
    const withdraw = this.wakeups?.leave ?? this.backend.leave
    if (!this.mayBeRegistered || withdraw === undefined || this.params.caller.hasSuccessor()) return release
    const leave = withdraw(this.key, this.waiter!.id, releaseTimeoutMillis, this.params.permits)
    if (release === undefined) return leave
    return Effect.all([release, leave], { concurrency: "unbounded", discard: true })
  }
}

const busyOutcome: AcquireOutcome = { _tag: "Busy" }
