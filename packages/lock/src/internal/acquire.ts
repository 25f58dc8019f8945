// Acquisition: attempts, backoff, the deadline, and cleanup of attempts whose outcome is unknown.
//
// The budget covers everything: server replies, retry delays, and the attempt in flight, which is
// abandoned at the deadline. An attempt whose outcome is unknown (timed out, or failed after it may
// have executed) leaves the lock "uncertain": the next attempt settles it (the acquire script is
// idempotent for our own token), and if none does, a bounded release runs before the call returns,
// so nothing is left held beyond its lease.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Backend } from "../LockBackend.ts"
import { LockLost, type RedisError, TimedOut } from "../LockError.ts"
import { type BackoffPolicy, nextDelay } from "./backoff.ts"
import { moreInformative, noReply } from "./failures.ts"
import { releaseBounded } from "./release.ts"
import type { Settings } from "./settings.ts"
import { nowMillis } from "./time.ts"

/** A lock the caller holds: where, with which token, and until when it may rely on it. */
export interface HeldLease {
  readonly key: string
  readonly token: string
  /** Monotonic time (ms) from which the lease can no longer be relied on. */
  readonly validUntil: number
}

export type AcquireOutcome = { readonly _tag: "Held"; readonly lease: HeldLease } | { readonly _tag: "Busy" }

export interface AcquireParams {
  readonly backend: Backend
  readonly settings: Settings
  readonly key: string
  readonly token: string
  readonly budgetMillis: number
  /** `wait` retries a busy lock until the budget ends; `try` returns `Busy` at once. */
  readonly mode: "wait" | "try"
}

/** Backoff while waiting for a busy lock: 10 ms doubling up to 1 s (or a fifth of the lease). */
const waitPolicy = (settings: Settings): BackoffPolicy => ({
  baseMillis: Math.min(10, settings.leaseMillis / 10),
  capMillis: Math.min(1_000, Math.max(20, settings.leaseMillis / 5))
})

export const acquire = (params: AcquireParams): Effect.Effect<AcquireOutcome, TimedOut | LockLost | RedisError> =>
  Effect.suspend(() => {
    const { backend, key, settings, token } = params
    let uncertain = false
    const request = (timeoutMillis: number) => ({
      key,
      token,
      leaseMillis: settings.leaseMillis,
      timeoutMillis,
      acknowledge: settings.replicaAcknowledgement
    })
    const policy = waitPolicy(settings)

    const loop = Effect.gen(function* () {
      const start = yield* nowMillis
      const deadline = start + params.budgetMillis
      let attempts = 0
      let lastError: RedisError | undefined
      let lastBusy = false
      while (true) {
        const sentAt = yield* nowMillis
        const remaining = deadline - sentAt
        if (remaining <= 0) break
        attempts++
        const before = uncertain
        uncertain = true
        // A grant that takes longer than the usable lease could not be relied on anyway.
        const attemptMillis = Math.min(remaining, settings.usableLeaseMillis)
        const result = yield* backend
          .acquire(request(attemptMillis))
          .pipe(Effect.timeoutOption(attemptMillis), Effect.result)
        if (result._tag === "Failure") {
          const error = result.failure
          if (!error.mayHaveExecuted) uncertain = before
          if (!error.retryable) return yield* error
          lastError = moreInformative(lastError, error)
          lastBusy = false
          const now = yield* nowMillis
          yield* Effect.sleep(yield* nextDelay(policy, attempts - 1, deadline - now))
          continue
        }
        if (result.success._tag === "None") {
          // Cut off by the deadline. After a busy reply this says nothing new about the server, so
          // it does not turn a "busy" timeout into an "unavailable" one.
          if (!lastBusy) lastError = moreInformative(lastError, noReply("acquire", attemptMillis))
          continue
        }
        const reply = result.success.value
        if (reply._tag === "Acquired") {
          const receivedAt = yield* nowMillis
          const validUntil = sentAt + settings.usableLeaseMillis
          if (receivedAt >= validUntil) {
            // The grant arrived after the usable lease was spent: another process may already be
            // entitled to the key. The body must not start; the cleanup below releases our write.
            return yield* new LockLost({
              key,
              namespace: settings.namespace,
              phase: "acquire",
              reason: "expired",
              bodyCompleted: false
            })
          }
          uncertain = false
          return { _tag: "Held", lease: { key, token, validUntil } } satisfies AcquireOutcome
        }
        if (reply._tag === "NotMaster") {
          // The write landed on a node that is not (or no longer) the master: a failover may drop
          // it, or grant the key to someone else. The body must not start; cleanup releases it.
          return yield* new LockLost({
            key,
            namespace: settings.namespace,
            phase: "acquire",
            reason: "not-master",
            bodyCompleted: false
          })
        }
        uncertain = false
        if (params.mode === "try") return { _tag: "Busy" } satisfies AcquireOutcome
        lastBusy = true
        const now = yield* nowMillis
        yield* Effect.sleep(yield* nextDelay(policy, attempts - 1, deadline - now, reply.remainingMillis))
      }
      const end = yield* nowMillis
      return yield* new TimedOut({
        key,
        namespace: settings.namespace,
        waitedMillis: Math.round(end - start),
        attempts,
        reason: lastBusy ? "busy" : lastError?.code === "UNACKNOWLEDGED" ? "unacknowledged" : "unavailable",
        ...(lastError === undefined || lastBusy ? {} : { lastError })
      })
    })

    return loop.pipe(
      Effect.onExit((exit) =>
        uncertain && !(Exit.isSuccess(exit) && exit.value._tag === "Held")
          ? releaseBounded(backend, request, "abandoned acquisition")
          : Effect.void
      )
    )
  })
