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
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { AcquireReply, Backend, Granted, LeaseRequest } from "../LockBackend.ts"
import { LockLost, type LockRedisError, TimedOut } from "../LockError.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { moreInformative } from "./failures.ts"
import { releaseBounded } from "./release.ts"
import { releaseTimeoutMillis, type Settings, usableLeaseMillis } from "./settings.ts"
import { monotonicMillis, withNow } from "./time.ts"
import { annotate, type CallTrace, event } from "./tracing.ts"

/** A lock the caller holds: where, with which token, and when the request that granted it was sent. */
export interface HeldLease {
  readonly key: string
  readonly token: string
  /** Monotonic time (ms) at which the granting request was sent: the usable lease counts from it. */
  readonly sentAt: number
  /** The grant's fencing token. */
  readonly fence: number
  /**
   * The lease the key was granted with, when not the lock's own: a release's grant lasts its claim
   * window, and the first renewal sets the lock's lease.
   */
  readonly leaseMillis?: number | undefined
}

export type AcquireOutcome = { readonly _tag: "Held"; readonly lease: HeldLease } | { readonly _tag: "Busy" }

export interface AcquireParams {
  readonly backend: Backend
  readonly settings: Settings
  readonly key: string
  readonly token: string
  /** Monotonic time (ms) of the call: `TimedOut.waitedMillis` counts from here. */
  readonly startedAt: number
  /** The deadline (monotonic ms) for the whole acquisition. */
  readonly deadline: number
  /** `wait` retries a busy lock until the deadline; `try` returns `Busy` at once. */
  readonly mode: "wait" | "try"
  /** The caller already waited behind another fiber of its client: the key was busy all along. */
  readonly waitedBehind: boolean
  /**
   * The key may already hold `token` (a transfer to it whose outcome is unknown): an attempt
   * settles it, and giving up releases it.
   */
  readonly uncertain?: boolean | undefined
  /**
   * The client's waiter id, in `wait` mode over a backend with wake-ups: busy replies register it at
   * the server, and releases wake it.
   */
  readonly waiterId?: string | undefined
  /** Whether another fiber of the client waits for this key (it inherits the server registration). */
  readonly hasSuccessor: () => boolean
  /**
   * Told the failure its attempts keep retrying while the server does not answer, and `undefined`
   * once it answers or the acquisition ends (for `tryWithLock` calls of the same client, which must
   * not read an outage as "busy").
   */
  readonly unavailable?: ((key: string, error: LockRedisError | undefined) => void) | undefined
  /** The call's span, when traced: attempts and waits are recorded on it. */
  readonly trace?: CallTrace | undefined
  /** The clock of the calling fiber, read directly on the hot path (an Effect step per read costs). */
  readonly clock: Clock.Clock
  /** Told how the acquisition ended, and when (monotonic ms). */
  readonly settled?: (exit: Exit.Exit<AcquireOutcome, unknown>, end: number) => void
}

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
 * Attempts until acquired, busy (`try`), the deadline, or a permanent failure. Written as a chain
 * of plain continuations rather than a generator: the uncontended case is one backend call.
 *
 * The acquisition starts when this is called (its first attempt's send time is read here), so call
 * it when the returned effect is to run at once, once: a locked call does, at its start.
 */
export const acquire = (params: AcquireParams): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError> => {
  const { backend, key, settings, token, deadline, clock } = params
  const usable = settings.usableLeaseMillis
  let uncertain = params.uncertain === true
  let attempts = 0
  let lastError: LockRedisError | undefined
  let lastBusy = params.waitedBehind
  let policy: BackoffPolicy | undefined
  const wakeups = params.mode === "wait" && params.waiterId !== undefined ? backend.wakeups : undefined
  const waiter =
    wakeups === undefined
      ? undefined
      : { id: params.waiterId!, ttlMillis: registrationMillis((policy = waitPolicy(settings))) }
  let registered = false
  // Whether `params.unavailable` was last told of a failure (so the hot path tells it nothing).
  let reportedUnavailable = false
  const available = (): void => {
    if (reportedUnavailable) {
      reportedUnavailable = false
      params.unavailable?.(key, undefined)
    }
  }
  // The send time of the last busy attempt that registered the waiter, and the highest fence
  // issued before it ran: a grant is relied on only if it is newer than both.
  let busySentAt = 0
  let fenceFloor: number | undefined
  const request = (timeoutMillis: number): LeaseRequest => ({
    key,
    token,
    leaseMillis: settings.leaseMillis,
    timeoutMillis,
    acknowledge: settings.replicaAcknowledgement,
    waiter
  })
  const lost = (reason: "expired" | "not-master") =>
    new LockLost({ key, namespace: settings.namespace, phase: "acquire", reason, bodyCompleted: false })

  const timedOut = withNow((end) =>
    Effect.fail(
      new TimedOut({
        key,
        namespace: settings.namespace,
        waitedMillis: Math.round(end - params.startedAt),
        attempts,
        reason: lastBusy ? "busy" : lastError?.code === "UNACKNOWLEDGED" ? "unacknowledged" : "unavailable",
        ...(lastError === undefined || lastBusy ? {} : { lastError })
      })
    )
  )

  const retryAfter = (
    holderRemainingMillis?: number
  ): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError> =>
    withNow((now) => {
      policy ??= waitPolicy(settings)
      if (wakeups !== undefined && registered) {
        // Registered at the server: wait until a release names this waiter, polling only as a
        // safety net (the exponent 30 means "at the cap").
        return Effect.flatMap(nextDelay(policy, 30, deadline - now, holderRemainingMillis), (delay) => {
          event(params.trace, "lock.wait", { "lock.wait.until": "wake-up", "lock.wait.max_ms": delay })
          return Effect.flatMap(wakeups.await(key, waiter!.id, delay), (woken) =>
            typeof woken === "object" ? granted(woken) : attempt
          )
        })
      }
      return Effect.flatMap(nextDelay(policy, attempts - 1, deadline - now, holderRemainingMillis), (delay) => {
        event(params.trace, "lock.wait", { "lock.wait.until": "backoff", "lock.wait.max_ms": delay })
        return Effect.andThen(Effect.sleep(delay), attempt)
      })
    })

  // A release handed the key to this waiter. It holds it from the release until the grant's window
  // ends, so from `busySentAt` (earlier) for as long, if the grant is not an old one (its fence is
  // above the floor). Taken only with time to renew it; otherwise an attempt takes the key with a
  // full lease (the acquire script converts a grant to its waiter), as it does when the message
  // came before the busy reply or a grant is in doubt.
  const granted = (grant: Granted): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError> =>
    withNow((now) => {
      const fresh = fenceFloor !== undefined && grant.fence > fenceFloor
      if (!fresh || now >= busySentAt + usableLeaseMillis(grant.leaseMillis) - grant.leaseMillis / 3) return attempt
      event(params.trace, "lock.attempt", grantedAttempt)
      return Effect.succeed<AcquireOutcome>({
        _tag: "Held",
        lease: { key, token: grant.token, sentAt: busySentAt, fence: grant.fence, leaseMillis: grant.leaseMillis }
      })
    })

  // One attempt, sent now (`sentAt`): the first runs at once, retries through `attempt`.
  const attemptAt = (sentAt: number): Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError> => {
    const remaining = deadline - sentAt
    if (remaining <= 0) return timedOut
    attempts++
    // Only a grant made after a busy reply, with no attempt since, can be taken as it comes.
    fenceFloor = undefined
    const before = uncertain
    uncertain = true
    // A grant that takes longer than the usable lease could not be relied on anyway.
    const attemptMillis = Math.min(remaining, usable)
    return Effect.matchEffect(backend.acquire(request(attemptMillis)), {
      onFailure: (error) => {
        event(params.trace, "lock.attempt", { "lock.attempt": attempts, "lock.attempt.result": error.code })
        if (!error.mayHaveExecuted) uncertain = before
        if (!error.retryable) return Effect.fail(error)
        // A bare timeout after a busy reply says nothing new about the server, so it does not
        // turn a "busy" timeout into an "unavailable" one.
        if (!(lastBusy && error.kind === "timeout")) {
          lastError = moreInformative(lastError, error)
          lastBusy = false
          if (params.unavailable !== undefined) {
            reportedUnavailable = true
            params.unavailable(key, lastError)
          }
        }
        return retryAfter()
      },
      onSuccess: (reply) => {
        available()
        if (params.trace !== undefined) event(params.trace, "lock.attempt", attemptAttributes(attempts, reply))
        if (reply._tag === "Acquired") {
          // The grant arrived after the usable lease was spent: another process may already be
          // entitled to the key. The body must not start; the cleanup releases our write.
          if (monotonicMillis(clock) >= sentAt + usable) return Effect.fail(lost("expired"))
          // `uncertain` stays set: should an interruption end the acquisition before this outcome
          // is delivered, the cleanup releases the lock. A delivered `Held` needs no cleanup.
          return Effect.succeed<AcquireOutcome>({ _tag: "Held", lease: { key, token, sentAt, fence: reply.fence } })
        }
        // The write landed on a node that is not (or no longer) the master: a failover may drop
        // it, or grant the key to someone else. The body must not start; cleanup releases it.
        if (reply._tag === "NotMaster") return Effect.fail(lost("not-master"))
        uncertain = false
        if (params.mode === "try") return Effect.succeed<AcquireOutcome>(busyOutcome)
        lastBusy = true
        if (waiter !== undefined) {
          registered = true
          busySentAt = sentAt
          fenceFloor = reply.fenceFloor
        }
        return retryAfter(reply.remainingMillis)
      }
    })
  }
  const attempt: Effect.Effect<AcquireOutcome, TimedOut | LockLost | LockRedisError> = Effect.suspend(() =>
    attemptAt(monotonicMillis(clock))
  )

  return Effect.onExit(attemptAt(monotonicMillis(clock)), (exit) => {
    available()
    params.settled?.(exit, monotonicMillis(clock))
    if (params.trace !== undefined) annotate(params.trace, outcomeAttributes(exit))
    return cleanup(exit)
  })

  function cleanup(exit: Exit.Exit<AcquireOutcome, TimedOut | LockLost | LockRedisError>): Effect.Effect<void> {
    if (Exit.isSuccess(exit) && exit.value._tag === "Held") return Effect.void
    const release = uncertain ? releaseBounded(backend, request, "abandoned acquisition") : Effect.void
    // Giving up: withdraw from the server's line, unless another fiber of this client takes over
    // the same registration (same waiter id) for this key. Both run at once, so the cleanup stays
    // within one second in all (one after the other they could take two): each is safe in either
    // order, since a release wakes the next waiter itself and leaving wakes one only if the key
    // is free.
    if (!registered || wakeups === undefined || params.hasSuccessor()) return release
    return Effect.all([release, wakeups.leave(key, waiter!.id, releaseTimeoutMillis)], {
      concurrency: "unbounded",
      discard: true
    })
  }
}

const busyOutcome: AcquireOutcome = { _tag: "Busy" }

const grantedAttempt = { "lock.attempt": 0, "lock.attempt.result": "granted" }

/** What one attempt's reply says, as span event attributes. */
const attemptAttributes = (attempt: number, reply: AcquireReply): Record<string, unknown> => {
  if (reply._tag === "Acquired") return { "lock.attempt": attempt, "lock.attempt.result": "acquired" }
  if (reply._tag === "NotMaster") return { "lock.attempt": attempt, "lock.attempt.result": "not-master" }
  return reply.remainingMillis === -2
    ? { "lock.attempt": attempt, "lock.attempt.result": "queued" }
    : { "lock.attempt": attempt, "lock.attempt.result": "busy", "lock.holder.remaining_ms": reply.remainingMillis }
}

/** How an acquisition ended, as span attributes (`lock.outcome` and the reason of a failure). */
const outcomeAttributes = (exit: Exit.Exit<AcquireOutcome, unknown>): Record<string, unknown> => {
  if (Exit.isSuccess(exit)) return { "lock.outcome": exit.value._tag === "Held" ? "acquired" : "busy" }
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "None") return { "lock.outcome": "interrupted" }
  const failure = error.value
  if (failure instanceof TimedOut) {
    return {
      "lock.outcome": "timed_out",
      "lock.timed_out.reason": failure.reason,
      "lock.attempts": failure.attempts,
      "lock.waited_ms": failure.waitedMillis
    }
  }
  if (failure instanceof LockLost) {
    return { "lock.outcome": "lost", "lock.lost.phase": failure.phase, "lock.lost.reason": failure.reason }
  }
  return { "lock.outcome": "error", "lock.error.code": (failure as LockRedisError).code }
}
