// What an acquisition records on its call's span: each attempt's result as an event, and how the
// acquisition ended as attributes.
import * as Cause from "effect/Cause"
import * as Exit from "effect/Exit"
import type { AcquireReply } from "../LockBackend.ts"
import { LockLost, type LockRedisError, TimedOut } from "../LockError.ts"
import type { AcquireOutcome } from "./acquisition.ts"

export const grantedAttempt = { "lock.attempt": 0, "lock.attempt.result": "granted" }

/** What one attempt's reply says, as span event attributes. */
export const attemptAttributes = (attempt: number, reply: AcquireReply): Record<string, unknown> => {
  if (reply._tag === "Acquired") return { "lock.attempt": attempt, "lock.attempt.result": "acquired" }
  if (reply._tag === "NotMaster") return { "lock.attempt": attempt, "lock.attempt.result": "not-master" }
  if (reply._tag === "LimitConflict") return { "lock.attempt": attempt, "lock.attempt.result": "limit-conflict" }
  return reply.remainingMillis === -2
    ? { "lock.attempt": attempt, "lock.attempt.result": "queued" }
    : { "lock.attempt": attempt, "lock.attempt.result": "busy", "lock.holder.remaining_ms": reply.remainingMillis }
}

/** How an acquisition ended, as span attributes (`lock.outcome` and the reason of a failure). */
export const outcomeAttributes = (exit: Exit.Exit<AcquireOutcome, unknown>): Record<string, unknown> => {
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
