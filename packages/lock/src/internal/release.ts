// Release: compare-and-delete on the token, bounded to one second in all. It is called from cleanup paths
// (after the body, after an abandoned acquisition), so it never fails: it reports what happened.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Backend, LeaseRequest, ReleaseReply } from "../LockBackend.ts"
import type { LockRedisError } from "../LockError.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { releaseTimeoutMillis } from "./settings.ts"
import { monotonicMillis } from "./time.ts"

const retryPolicy: BackoffPolicy = { baseMillis: 10, capMillis: 200 }

export type ReleaseOutcome = { readonly _tag: "Released" } | Gone | NotOwner | Failed

export const released: ReleaseOutcome = { _tag: "Released" }

/**
 * The key was already gone when the first attempt that could have deleted it ran, and no lock had been
 * granted on it since the lease's own (the fence key still held the lease's fencing token): nobody
 * else held the lock in between. The lease ran out on the server, or something deleted the key.
 */
export interface Gone {
  readonly _tag: "Gone"
  /** Monotonic ms at which the release's first attempt was sent. */
  readonly startedAt: number
  /** Monotonic ms at which the reply that found the key gone came back. */
  readonly receivedAt: number
}

/**
 * The key was gone or held another token when an attempt ran. When that attempt was sent matters:
 * one sent after the lease could have run out on the server tells nothing about the time before.
 */
export interface NotOwner {
  readonly _tag: "NotOwner"
  /** Monotonic ms at which the release's first attempt was sent. */
  readonly startedAt: number
  /** Monotonic ms at which the attempt that found the key not ours was sent. */
  readonly sentAt: number
}

export const notOwner = (startedAt: number, sentAt: number): NotOwner => ({ _tag: "NotOwner", startedAt, sentAt })

/** Gave up: the second ran out, or the failure was not retryable. */
export interface Failed {
  readonly _tag: "Failed"
  readonly error: LockRedisError | undefined
}

/**
 * Runs `operation` within one second in all: a retryable failure (a failover's MOVED or READONLY, a
 * dropped connection) is retried with short backoff while the second lasts, each attempt bounded by
 * what is left of it. `operation` must be safe to repeat. Uninterruptible: it runs from cleanup
 * paths, and its bound keeps it short.
 */
export const withinReleaseBound = <A, B>(
  /** One attempt, within `timeoutMillis`. */
  operation: (timeoutMillis: number) => Effect.Effect<A, LockRedisError>,
  /**
   * Told the reply, when the bound started, when the attempt that got the reply was sent, whether an
   * earlier attempt may have run (its reply was lost), and when the reply came back.
   */
  done: (value: A, startedAt: number, sentAt: number, afterRun: boolean, receivedAt: number) => B,
  /** The end of the bound (monotonic ms), when it started earlier: one step of a longer release. */
  deadline?: number
): Effect.Effect<B | Failed> =>
  Effect.uninterruptible(
    Effect.withFiber((fiber) =>
      boundedFromNow<A, B | Failed, B | Failed, never>(
        operation,
        done,
        fiber.getRef(Clock.Clock),
        Effect.succeed,
        deadline
      )
    )
  )

/**
 * `withinReleaseBound`, its second counted from the moment this is called, continuing with `then`:
 * for a caller that is already uninterruptible and runs the result at once (a locked call's
 * release, every call), in fewer Effect steps.
 */
const boundedFromNow = <A, B, C, E>(
  operation: (timeoutMillis: number) => Effect.Effect<A, LockRedisError>,
  done: (value: A, startedAt: number, sentAt: number, afterRun: boolean, receivedAt: number) => B,
  clock: Clock.Clock,
  then: (outcome: B | Failed) => Effect.Effect<C, E>,
  givenDeadline?: number
): Effect.Effect<C, E> => {
  const start = monotonicMillis(clock)
  const deadline = givenDeadline ?? start + releaseTimeoutMillis
  let lastError: LockRedisError | undefined
  let mayHaveRun = false
  const attempt = (n: number, now: number): Effect.Effect<C, E> => {
    const remaining = deadline - now
    if (remaining <= 0) return then({ _tag: "Failed", error: lastError })
    return Effect.matchEffect(operation(remaining), {
      onSuccess: (value) => then(done(value, start, now, mayHaveRun, monotonicMillis(clock))),
      onFailure: (error) => {
        lastError = error
        if (error.mayHaveExecuted) mayHaveRun = true
        if (!error.retryable) return then({ _tag: "Failed", error })
        return Effect.flatMap(nextDelay(retryPolicy, n, deadline - monotonicMillis(clock)), (delay) =>
          Effect.andThen(
            Effect.sleep(delay),
            Effect.suspend(() => attempt(n + 1, monotonicMillis(clock)))
          )
        )
      }
    })
  }
  return attempt(0, start)
}

/**
 * One release attempt. Every attempt carries the lease's fencing token, when known, so that a key
 * found gone with no grant since is told apart from one another caller took (see
 * `LeaseRequest.fence`): after an attempt that may have run, that attempt deleted it; otherwise the
 * lease ran out (or the key was deleted) with nobody taking the lock.
 */
const releaseAttempt =
  (backend: Backend, request: (timeoutMillis: number) => LeaseRequest, fence: number | undefined) =>
  (timeoutMillis: number): Effect.Effect<ReleaseReply, LockRedisError> => {
    const asked = request(timeoutMillis)
    // A locked call's own request already carries its fence and asks for no acknowledgement: sent as
    // it is (every call).
    if (asked.fence !== fence && fence !== undefined) return backend.release({ ...asked, acknowledge: false, fence })
    return backend.release(asked.acknowledge ? { ...asked, acknowledge: false } : asked)
  }

/** Compare-and-delete within one second in all (see `withinReleaseBound`). */
export const release = (
  backend: Backend,
  request: (timeoutMillis: number) => LeaseRequest,
  deadline?: number,
  /** The lease's fencing token, sent with every attempt (see `releaseAttempt`). */
  fence?: number
): Effect.Effect<ReleaseOutcome> => withinReleaseBound(releaseAttempt(backend, request, fence), outcomeOf, deadline)

/**
 * `release` continuing with `then`, starting when this is called: for a caller that is
 * uninterruptible and runs it at once (the end of every locked call), four Effect steps fewer than
 * `Effect.flatMap(release(...), then)`.
 */
export const releaseNow = <C, E>(
  backend: Backend,
  request: (timeoutMillis: number) => LeaseRequest,
  /** The lease's fencing token (see `release`). */
  fence: number | undefined,
  clock: Clock.Clock,
  then: (outcome: ReleaseOutcome) => Effect.Effect<C, E>
): Effect.Effect<C, E> =>
  boundedFromNow<ReleaseReply, ReleaseOutcome, C, E>(releaseAttempt(backend, request, fence), outcomeOf, clock, then)

const outcomeOf = (
  reply: ReleaseReply,
  startedAt: number,
  sentAt: number,
  afterRun: boolean,
  receivedAt: number
): ReleaseOutcome =>
  reply === true
    ? released
    : reply === false
      ? notOwner(startedAt, sentAt)
      : afterRun
        ? released
        : { _tag: "Gone", startedAt, receivedAt }

/** A best-effort release for cleanup paths: logged at debug level, never failing. */
export const releaseBounded = (
  backend: Backend,
  request: (timeoutMillis: number) => LeaseRequest,
  context: string,
  /** See `withinReleaseBound`. */
  deadline?: number,
  /** See `release`. */
  fence?: number
): Effect.Effect<void> =>
  Effect.flatMap(release(backend, request, deadline, fence), (outcome) =>
    outcome._tag === "Failed"
      ? Effect.logDebug(`lock release after ${context} failed; the lease will free the key`, outcome.error)
      : Effect.void
  )
