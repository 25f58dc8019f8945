// Release: compare-and-delete on the token, bounded to one second in all. It is called from cleanup paths
// (after the body, after an abandoned acquisition), so it never fails: it reports what happened.
import * as Effect from "effect/Effect"
import type { Backend, LeaseRequest } from "../LockBackend.ts"
import type { RedisError } from "../LockError.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { releaseTimeoutMillis } from "./settings.ts"
import { nowMillis } from "./time.ts"

const retryPolicy: BackoffPolicy = { baseMillis: 10, capMillis: 200 }

export type ReleaseOutcome =
  | { readonly _tag: "Released" }
  | { readonly _tag: "NotOwner" }
  | { readonly _tag: "Failed"; readonly error: RedisError | undefined }

/**
 * Releases within one second in all: a retryable failure (a failover's MOVED or READONLY, a dropped
 * connection) is retried with short backoff while the second lasts, each attempt bounded by what is
 * left of it.
 */
export const release = (
  backend: Backend,
  request: (timeoutMillis: number) => LeaseRequest
): Effect.Effect<ReleaseOutcome> =>
  Effect.gen(function* () {
    const deadline = (yield* nowMillis) + releaseTimeoutMillis
    let lastError: RedisError | undefined
    for (let attempt = 0; ; attempt++) {
      const remaining = deadline - (yield* nowMillis)
      if (remaining <= 0) return { _tag: "Failed", error: lastError } satisfies ReleaseOutcome
      const result = yield* backend
        .release({ ...request(remaining), acknowledge: false })
        .pipe(Effect.timeoutOption(remaining), Effect.result)
      if (result._tag === "Success") {
        if (result.success._tag === "None") return { _tag: "Failed", error: lastError } satisfies ReleaseOutcome
        return (result.success.value ? { _tag: "Released" } : { _tag: "NotOwner" }) satisfies ReleaseOutcome
      }
      lastError = result.failure
      if (!result.failure.retryable) return { _tag: "Failed", error: lastError } satisfies ReleaseOutcome
      const left = deadline - (yield* nowMillis)
      yield* Effect.sleep(yield* nextDelay(retryPolicy, attempt, left))
    }
  }).pipe(Effect.uninterruptible)

/** A best-effort release for cleanup paths: logged at debug level, never failing. */
export const releaseBounded = (
  backend: Backend,
  request: (timeoutMillis: number) => LeaseRequest,
  context: string
): Effect.Effect<void> =>
  Effect.flatMap(release(backend, request), (outcome) =>
    outcome._tag === "Failed"
      ? Effect.logDebug(`lock release after ${context} failed; the lease will free the key`, outcome.error)
      : Effect.void
  )
