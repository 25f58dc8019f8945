// A batch's connection as its members use it after their shared round trip: a second `WAIT` a member
// needs rides on one already on its way when that one covers the member's write too.
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type { LockRedisError } from "@sage/lock/LockError"
import { noReply } from "../../connection/sending.ts"
import { timerDelay } from "../../connection/timerDelay.ts"
import type { Connection } from "../../pool/connection.ts"

/** A `WAIT` on its way on a batch's connection, whose reply members that need the same may share. */
interface SharedWait {
  readonly wanted: number
  /** Writes sent on the connection before it: a member whose write came later cannot use it. */
  readonly writes: number
  readonly listeners: Set<(reply: Result.Result<unknown, LockRedisError>) => void>
}

/**
 * The batch's connection as its members use it. A member that needs a second `WAIT` (the early one
 * ran out, or asked for too few replicas) takes the reply of one already on its way, if it asks for
 * as many replicas and no write went out on the connection since: `WAIT` covers every write made
 * before it on its connection, so that reply answers for this member's write too. Sent one after
 * the other instead, each would block the connection in turn and the last ones would run out of
 * time behind the others.
 */
export const sharingWaits = (connection: Connection): Connection => {
  let writes = 0
  let inFlight: SharedWait | undefined
  const join = (shared: SharedWait, timeoutMillis: number) =>
    Effect.callback<unknown, LockRedisError>((resume) => {
      const millis = timerDelay(timeoutMillis)
      const listener = (reply: Result.Result<unknown, LockRedisError>) => {
        clearTimeout(timer)
        resume(Result.isSuccess(reply) ? Effect.succeed(reply.success) : Effect.fail(reply.failure))
      }
      const timer = setTimeout(() => {
        shared.listeners.delete(listener)
        resume(Effect.fail(noReply("WAIT", millis)))
      }, millis)
      shared.listeners.add(listener)
      return Effect.sync(() => {
        clearTimeout(timer)
        shared.listeners.delete(listener)
      })
    })
  return {
    address: connection.address,
    sendAll: connection.sendAll,
    send: (args, timeoutMillis) =>
      Effect.suspend(() => {
        if (args[0] !== "WAIT") {
          if (args[0] === "EVAL" || args[0] === "EVALSHA") writes++
          return connection.send(args, timeoutMillis)
        }
        const wanted = Number(args[1])
        const current = inFlight
        if (current !== undefined && current.writes === writes && current.wanted >= wanted) {
          return join(current, timeoutMillis)
        }
        const shared: SharedWait = { wanted, writes, listeners: new Set() }
        inFlight = shared
        return Effect.onExit(connection.send(args, timeoutMillis), (exit) =>
          Effect.sync(() => {
            if (inFlight === shared) inFlight = undefined
            const reply: Result.Result<unknown, LockRedisError> =
              exit._tag === "Success"
                ? Result.succeed(exit.value)
                : Result.fail(Option.getOrElse(Cause.findErrorOption(exit.cause), () => noReply("WAIT", timeoutMillis)))
            for (const listener of shared.listeners) listener(reply)
          })
        )
      })
  }
}
