// A fenced write over any connection that can send a command (`FencedWrite.set` over node-redis,
// `CommandBackend.fencedSet` over another client): the options checked before anything is sent,
// one script, its reply read. It loads no client library.
import * as Effect from "effect/Effect"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import { runScript, type Send } from "./connection/sending.ts"
import { commandTimeout } from "./options/commandTimeout.ts"
import { valueText } from "./options/valueText.ts"
import { unexpected } from "./replies.ts"
import * as Scripts from "./scripts.ts"

/**
 * One fenced write.
 *
 * @category options
 * @since 0.2.0
 */
export interface SetOptions {
  /** The data key. */
  readonly key: string
  /** The value to store (a string, as `SET` takes it). */
  readonly value: string
  /** The writer's fencing token: `Lease.fencingToken` of the lock it holds. */
  readonly fencingToken: number
  /**
   * Where the highest token accepted for this data is kept. Defaults to `<key>:fence`; on Cluster
   * give the data key a hash tag (`{account:42}`) so both keys live in one slot.
   */
  readonly fenceKey?: string | undefined
  /** How long to wait for the reply, in milliseconds. Defaults to 1000. */
  readonly timeoutMillis?: number | undefined
}

/**
 * The outcome of a fenced write: `Written`, or `Stale` when a newer token (`lastToken`) had already
 * written, so nothing was written.
 *
 * @category models
 * @since 0.2.0
 */
export type SetResult = { readonly _tag: "Written" } | { readonly _tag: "Stale"; readonly lastToken: number }

const written: SetResult = { _tag: "Written" }

const invalid = (field: string, value: unknown, reason: string): InvalidArgument =>
  new InvalidArgument({ field, value: valueText(value), reason })

/** The options of one write, checked before anything is sent: a bad token would defeat the fence. */
const checkSet = (options: SetOptions): Effect.Effect<number, InvalidArgument> => {
  if (typeof options !== "object" || options === null) {
    return Effect.fail(invalid("options", options, "must be an object with key, value and fencingToken"))
  }
  const { fencingToken, fenceKey, key, timeoutMillis, value } = options
  if (typeof key !== "string" || key.length === 0) return Effect.fail(invalid("key", key, "must be a non-empty string"))
  if (typeof value !== "string") return Effect.fail(invalid("value", value, "must be a string"))
  if (!(typeof fencingToken === "number" && Number.isSafeInteger(fencingToken) && fencingToken >= 1)) {
    return Effect.fail(
      invalid("fencingToken", fencingToken, "must be a positive integer below 2^53 (a lease's fencingToken)")
    )
  }
  if (fenceKey !== undefined && (typeof fenceKey !== "string" || fenceKey.length === 0)) {
    return Effect.fail(invalid("fenceKey", fenceKey, "must be a non-empty string"))
  }
  return commandTimeout(timeoutMillis, 1_000)
}

/** Writes `options.value` with `send` unless a newer token has written since. */
export const fencedSet = (
  send: Send,
  options: SetOptions
): Effect.Effect<SetResult, LockRedisError | InvalidArgument> =>
  Effect.flatMap(
    Effect.flatMap(checkSet(options), (timeoutMillis) =>
      runScript(
        send,
        Scripts.fencedSet,
        [options.key, options.fenceKey ?? `${options.key}:fence`],
        [String(options.fencingToken), options.value],
        timeoutMillis
      )
    ),
    (reply) => {
      if (Array.isArray(reply) && typeof reply[1] === "number") {
        if (reply[0] === 1) return Effect.succeed(written)
        if (reply[0] === 0) return Effect.succeed<SetResult>({ _tag: "Stale", lastToken: reply[1] })
      }
      return Effect.fail(unexpected("fencedSet", reply))
    }
  )
