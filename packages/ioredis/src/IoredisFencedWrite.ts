/**
 * Fenced writes over an ioredis client: data in Redis written only by the newest lock holder.
 *
 * A holder passes its lease's fencing token with each write, and the write is applied only when that
 * token is not older than the newest token the data has accepted, so a holder that was paused past
 * its lease cannot overwrite what a later holder wrote (see `docs/fencing.md`). The same script as
 * `FencedWrite` of `@sage/lock-node-redis`: processes on either client fence the same data.
 *
 * It does not lock anything and does not retry: a `LockRedisError` says the write may or may not have
 * been applied (`mayHaveExecuted`). Bad options fail with `InvalidArgument` before anything is sent.
 *
 * @since 0.2.1
 */
import type * as Effect from "effect/Effect"
import type { Cluster, Redis } from "ioredis"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import * as CommandBackend from "@sage/lock-node-redis/CommandBackend"
import { classify } from "./internal/classify.ts"
import { sendOn } from "./internal/send.ts"

/**
 * One fenced write: `key`, `value`, the writer's `fencingToken`, and optionally `fenceKey` (default
 * `<key>:fence`; give the data key a hash tag on Cluster) and `timeoutMillis` (default 1000).
 *
 * @category options
 * @since 0.2.1
 */
export type SetOptions = CommandBackend.FencedSetOptions

/**
 * `Written`, or `Stale` with the newer token (`lastToken`) that had written, so nothing was written.
 *
 * @category models
 * @since 0.2.1
 */
export type SetResult = CommandBackend.FencedSetResult

/**
 * Writes `value` to `key` with `redis` (a `Redis` or a `Cluster`, which routes by the keys) only if
 * `fencingToken` is not older than the last token accepted for it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Redis } from "ioredis"
 * import { Lease, Lock } from "@sage/lock"
 * import { IoredisFencedWrite } from "@sage/lock-ioredis"
 *
 * const redis = new Redis("redis://127.0.0.1:6379")
 * const deposit = (balance: number) =>
 *   Effect.gen(function* () {
 *     const lease = yield* Lease.Lease
 *     const result = yield* IoredisFencedWrite.set(redis, {
 *       key: "{account:42}:balance",
 *       value: String(balance),
 *       fencingToken: lease.fencingToken
 *     })
 *     if (result._tag === "Stale") yield* Effect.logWarning(`rejected: token ${result.lastToken} wrote since`)
 *   }).pipe(Lock.withLock("account:42", { waitTimeout: "2 seconds" }))
 * ```
 *
 * @category writes
 * @since 0.2.1
 */
export const set = (
  redis: Pick<Redis, "call"> | Pick<Cluster, "call">,
  options: SetOptions
): Effect.Effect<SetResult, LockRedisError | InvalidArgument> =>
  CommandBackend.fencedSet({ send: sendOn(redis) }, options, classify)
