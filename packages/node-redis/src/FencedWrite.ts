/**
 * Fenced writes for data kept in Redis: the resource side of fencing tokens.
 *
 * A lock holder passes its lease's fencing token with each write, and the write is applied only when
 * that token is not older than the newest token the data has already accepted. A holder that was
 * paused past its lease, or cut off by a failover, then cannot overwrite what a later holder wrote,
 * even though its write reaches the server after the lock has moved on. Data kept elsewhere (SQL,
 * an HTTP service) needs the same check there: see `docs/fencing.md`.
 *
 * It does not lock anything and does not retry: a `LockRedisError` says the write may or may not have
 * been applied (`mayHaveExecuted`). Options it cannot use (a token that is not a positive integer
 * below 2^53, an empty key, a time limit that is not a positive, finite number) fail with
 * `InvalidArgument` before anything is sent.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import { type CommandClient, runScript, sendWithin } from "./internal/connection/commands.ts"
import { commandTimeout } from "./internal/options/commandTimeout.ts"
import { valueText } from "./internal/options/valueText.ts"
import { unexpected } from "./internal/replies.ts"
import * as Scripts from "./internal/scripts.ts"

/**
 * What a fenced write needs of a client: node-redis's `sendCommand(args)`, as a standalone client (or
 * a connection of one) has it. For a Cluster client, route by the data key:
 * `{ sendCommand: (args) => cluster.sendCommand(key, false, args) }`.
 *
 * @category models
 * @since 0.2.0
 */
export type Client = CommandClient

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

/**
 * Writes `value` to `key` only if `fencingToken` is not older than the last token accepted for it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lease, Lock } from "@sage/lock"
 * import { FencedWrite } from "@sage/lock-node-redis"
 *
 * declare const client: FencedWrite.Client
 * const deposit = (balance: number) =>
 *   Effect.gen(function* () {
 *     const lease = yield* Lease.Lease
 *     const result = yield* FencedWrite.set(client, {
 *       key: "{account:42}:balance",
 *       value: String(balance),
 *       fencingToken: lease.fencingToken
 *     })
 *     if (result._tag === "Stale") yield* Effect.logWarning(`rejected: token ${result.lastToken} wrote since`)
 *   }).pipe(Lock.withLock("account:42", { waitTimeout: "2 seconds" }))
 * ```
 *
 * @category writes
 * @since 0.2.0
 */
export const set = (client: Client, options: SetOptions): Effect.Effect<SetResult, LockRedisError | InvalidArgument> =>
  Effect.flatMap(
    Effect.flatMap(checkSet(options), (timeoutMillis) =>
      runScript(
        (args, millis) => sendWithin(client, args as Array<string>, millis),
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
