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
import type * as Effect from "effect/Effect"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { type CommandClient, sendWithin } from "./internal/connection/commands.ts"
import { fencedSet, type SetOptions, type SetResult } from "./internal/fencedSet.ts"

/**
 * What a fenced write needs of a client: node-redis's `sendCommand(args)`, as a standalone client (or
 * a connection of one) has it. For a Cluster client, route by the data key:
 * `{ sendCommand: (args) => cluster.sendCommand(key, false, args) }`.
 *
 * @category models
 * @since 0.2.0
 */
export type Client = CommandClient

export type { SetOptions, SetResult } from "./internal/fencedSet.ts"

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
  fencedSet((args, millis) => sendWithin(client, args as Array<string>, millis), options)
