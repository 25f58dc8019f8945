// What the lock scripts' replies mean: the value each one stands for, or the failure.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { AcquireReply, ReleaseReply, TransferReply } from "@sage/lock/LockBackend"
import { LockRedisError } from "@sage/lock/LockError"
import type { Parse } from "./connection/sending.ts"

/**
 * The release script's reply: `1` released, `2` already gone with no grant since the request's
 * `fence` (only when the request carried one), `0` not ours.
 */
export const releasedReply = (reply: unknown): ReleaseReply => (reply === 1 ? true : reply === 2 ? "gone" : false)

/** `releasedReply` as a script parser. */
export const isReleased: Parse<ReleaseReply> = (reply) => Result.succeed(releasedReply(reply))

export const unexpected = (command: string, reply: unknown): LockRedisError =>
  new LockRedisError({
    command,
    kind: "server",
    code: "UNEXPECTED",
    reply: `unexpected reply ${JSON.stringify(reply)}`,
    retryable: false,
    mayHaveExecuted: true
  })

/** A retryable failure of the replicated checks (ROLE, WAIT): `NOT_MASTER`, `UNACKNOWLEDGED`. */
export const replicatedFailure = (code: string, reply: string, mayHaveExecuted: boolean): LockRedisError =>
  new LockRedisError({ command: "replicated", kind: "server", code, reply, retryable: true, mayHaveExecuted })

/**
 * Reads the acquire script's reply: `{1, fence}` acquired, `{0, pttl}` busy; and a semaphore's
 * `{-1, limit}`, in use with another limit.
 */
export const readAcquire: Parse<AcquireReply> = (reply) => {
  if (Array.isArray(reply) && reply[0] === 1 && typeof reply[1] === "number") {
    return Result.succeed({ _tag: "Acquired", fence: reply[1] })
  }
  if (Array.isArray(reply) && reply[0] === -1 && typeof reply[1] === "number") {
    return Result.succeed({ _tag: "LimitConflict", limit: reply[1] })
  }
  if (Array.isArray(reply) && reply[0] === 0 && typeof reply[1] === "number") {
    return Result.succeed(
      typeof reply[2] === "number"
        ? { _tag: "Busy", remainingMillis: reply[1], fenceFloor: reply[2] }
        : { _tag: "Busy", remainingMillis: reply[1] }
    )
  }
  return Result.fail(unexpected("acquire", reply))
}

/** `readAcquire` as an Effect. */
export const parseAcquire = (reply: unknown): Effect.Effect<AcquireReply, LockRedisError> =>
  Effect.fromResult(readAcquire(reply))

/** The transfer script's reply: `{1, fence, others}` or `{0}`. */
export const parseTransfer = (reply: unknown): Effect.Effect<TransferReply, LockRedisError> => {
  if (Array.isArray(reply) && reply[0] === 1 && typeof reply[1] === "number") {
    return Effect.succeed({ _tag: "Transferred", fence: reply[1], othersWaiting: reply[2] === 1 })
  }
  if (Array.isArray(reply) && reply[0] === 0) return Effect.succeed(notTransferred)
  return Effect.fail(unexpected("transfer", reply))
}

const notTransferred: TransferReply = { _tag: "NotOwner" }
