// Release: compare-and-delete on the token, bounded to one second. It is called from cleanup paths
// (after the body, after an abandoned acquisition), so it never fails: it reports what happened.
import * as Effect from "effect/Effect"
import type { Backend, LeaseRequest } from "../LockBackend.ts"
import type { RedisError } from "../LockError.ts"
import { releaseTimeoutMillis } from "./settings.ts"

export type ReleaseOutcome =
  | { readonly _tag: "Released" }
  | { readonly _tag: "NotOwner" }
  | { readonly _tag: "Failed"; readonly error: RedisError | undefined }

export const release = (
  backend: Backend,
  request: (timeoutMillis: number) => LeaseRequest
): Effect.Effect<ReleaseOutcome> =>
  backend.release({ ...request(releaseTimeoutMillis), acknowledge: false }).pipe(
    Effect.timeoutOption(releaseTimeoutMillis),
    Effect.match({
      onFailure: (error): ReleaseOutcome => ({ _tag: "Failed", error }),
      onSuccess: (reply): ReleaseOutcome =>
        reply._tag === "None"
          ? { _tag: "Failed", error: undefined }
          : reply.value
            ? { _tag: "Released" }
            : { _tag: "NotOwner" }
    }),
    Effect.uninterruptible
  )

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
