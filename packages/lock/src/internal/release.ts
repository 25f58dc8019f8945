// Release: compare-and-delete on the token, bounded to one second in all. It is called from cleanup paths
// (after the body, after an abandoned acquisition), so it never fails: it reports what happened.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Backend, LeaseRequest } from "../LockBackend.ts"
import type { LockRedisError } from "../LockError.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { releaseTimeoutMillis } from "./settings.ts"
import { monotonicMillis } from "./time.ts"

const retryPolicy: BackoffPolicy = { baseMillis: 10, capMillis: 200 }

export type ReleaseOutcome = { readonly _tag: "Released" } | NotOwner | Failed

export const released: ReleaseOutcome = { _tag: "Released" }

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
  /** One attempt; `retryAfterRun` when an earlier attempt may have run (its reply was lost). */
  operation: (timeoutMillis: number, retryAfterRun: boolean) => Effect.Effect<A, LockRedisError>,
  /** Told the reply, when the bound started and when the attempt that got the reply was sent. */
  done: (value: A, startedAt: number, sentAt: number) => B,
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
  operation: (timeoutMillis: number, retryAfterRun: boolean) => Effect.Effect<A, LockRedisError>,
  done: (value: A, startedAt: number, sentAt: number) => B,
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
    return Effect.matchEffect(operation(remaining, mayHaveRun), {
      onSuccess: (value) => then(done(value, start, now)),
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
 * One release attempt. A retry after an attempt that may have run carries the lease's fencing
 * token, when known: a key gone with no grant since then was released by that attempt (see
 * `LeaseRequest.fence`), not lost.
 */
const releaseAttempt =
  (backend: Backend, request: (timeoutMillis: number) => LeaseRequest, fence: number | undefined) =>
  (timeoutMillis: number, retryAfterRun: boolean): Effect.Effect<boolean, LockRedisError> => {
    const asked = request(timeoutMillis)
    if (retryAfterRun && fence !== undefined) return backend.release({ ...asked, acknowledge: false, fence })
    // A locked call's own request already asks for no acknowledgement: sent as it is (every call).
    return backend.release(asked.acknowledge ? { ...asked, acknowledge: false } : asked)
  }

/** Compare-and-delete within one second in all (see `withinReleaseBound`). */
export const release = (
  backend: Backend,
  request: (timeoutMillis: number) => LeaseRequest,
  deadline?: number,
  /** The lease's fencing token, for a retry after an attempt that may have run. */
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
  boundedFromNow<boolean, ReleaseOutcome, C, E>(releaseAttempt(backend, request, fence), outcomeOf, clock, then)

const outcomeOf = (ok: boolean, startedAt: number, sentAt: number): ReleaseOutcome =>
  ok ? released : notOwner(startedAt, sentAt)

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
