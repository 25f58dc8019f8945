// The renewal loop: runs beside the body and fails with `LockLost` the moment the caller can no
// longer rely on the lock. The caller races it against the body, so its failure interrupts the body
// (and waits for the body's finalizers) before `LockLost` is returned.
//
// Renewal fires a third of a lease after the last successful request was *sent*. The usable lease
// is likewise counted from the send time, not the reply: a slow reply shortens the usable lease and
// never stretches it. A temporary failure is retried with short backoff while the usable lease
// lasts; each attempt is bounded by what is left of it.
import * as Effect from "effect/Effect"
import type { Backend } from "../LockBackend.ts"
import { LockLost, type RedisError } from "../LockError.ts"
import type { HeldLease } from "./acquire.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { moreInformative, noReply } from "./failures.ts"
import type { Settings } from "./settings.ts"
import { nowMillis } from "./time.ts"

const retryPolicy = (settings: Settings): BackoffPolicy => ({
  baseMillis: Math.min(25, settings.leaseMillis / 20),
  capMillis: Math.max(5, settings.leaseMillis / 6)
})

export const renewalLoop = (backend: Backend, settings: Settings, lease: HeldLease): Effect.Effect<never, LockLost> =>
  Effect.gen(function* () {
    const policy = retryPolicy(settings)
    let validUntil = lease.validUntil
    let lastSentAt = validUntil - settings.usableLeaseMillis
    const lost = (reason: "ownership" | "expired" | "failed", cause?: RedisError) =>
      new LockLost({
        key: lease.key,
        namespace: settings.namespace,
        phase: "renew",
        reason,
        bodyCompleted: false,
        ...(cause === undefined ? {} : { cause })
      })

    while (true) {
      const now = yield* nowMillis
      yield* Effect.sleep(Math.max(0, lastSentAt + settings.renewEveryMillis - now))
      let failures = 0
      let lastError: RedisError | undefined
      while (true) {
        const sentAt = yield* nowMillis
        const remaining = validUntil - sentAt
        if (remaining <= 0) return yield* lost("expired", lastError)
        const result = yield* backend
          .renew({
            key: lease.key,
            token: lease.token,
            leaseMillis: settings.leaseMillis,
            timeoutMillis: remaining,
            acknowledge: settings.replicaAcknowledgement
          })
          .pipe(Effect.timeoutOption(remaining), Effect.result)
        if (result._tag === "Success" && result.success._tag === "Some") {
          if (!result.success.value) return yield* lost("ownership")
          lastSentAt = sentAt
          validUntil = sentAt + settings.usableLeaseMillis
          break
        }
        if (result._tag === "Success") {
          // No reply before the usable lease ran out.
          lastError = moreInformative(lastError, noReply("renew", remaining))
          continue
        }
        {
          if (!result.failure.retryable) return yield* lost("failed", result.failure)
          lastError = moreInformative(lastError, result.failure)
          yield* Effect.logDebug("lock renewal failed, retrying within the usable lease", result.failure)
          const after = yield* nowMillis
          yield* Effect.sleep(yield* nextDelay(policy, failures++, validUntil - after))
        }
      }
    }
  })
