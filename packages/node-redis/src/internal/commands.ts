// Sending the lock scripts and reading their replies, for any connection (shared or dedicated).
import * as Effect from "effect/Effect"
import type { AcquireReply } from "@sage/lock/LockBackend"
import { RedisError } from "@sage/lock/LockError"
import * as Scripts from "./scripts.ts"

/** Sends one command with its own timeout in milliseconds. */
export type Send = (args: ReadonlyArray<string>, timeoutMillis: number) => Effect.Effect<unknown, RedisError>

/** Runs a lock script by SHA1, re-sending its source on NOSCRIPT (which also re-caches it). */
export const runScript = (
  send: Send,
  script: Scripts.Script,
  key: string,
  args: ReadonlyArray<string>,
  timeoutMillis: number
): Effect.Effect<unknown, RedisError> =>
  send(Scripts.evalArgs("EVALSHA", script, key, args), timeoutMillis).pipe(
    Effect.catchIf(
      (error) => error.code === "NOSCRIPT",
      () => send(Scripts.evalArgs("EVAL", script, key, args), timeoutMillis)
    )
  )

export const unexpected = (command: string, reply: unknown): RedisError =>
  new RedisError({
    command,
    kind: "server",
    code: "UNEXPECTED",
    reply: `unexpected reply ${JSON.stringify(reply)}`,
    retryable: false,
    mayHaveExecuted: true
  })

/** Reads the acquire script's reply: `{1}` acquired, `{0, pttl}` busy. */
export const parseAcquire = (reply: unknown): Effect.Effect<AcquireReply, RedisError> => {
  if (Array.isArray(reply) && reply[0] === 1) return Effect.succeed({ _tag: "Acquired" })
  if (Array.isArray(reply) && reply[0] === 0 && typeof reply[1] === "number") {
    return Effect.succeed({ _tag: "Busy", remainingMillis: reply[1] })
  }
  return Effect.fail(unexpected("acquire", reply))
}
