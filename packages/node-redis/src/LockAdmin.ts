/**
 * Seeing and clearing locks from outside the programs that hold them: whether a lock is held, for
 * how much longer, its last fencing token and how many clients wait for it; every lock of a
 * namespace; and, as a last resort, forcing one free.
 *
 * Every function takes a node-redis client you connect (`createClient`, `createSentinel` or
 * `createCluster`): an operator's tool, not something a lock holder needs. Listing uses `SCAN`
 * (never `KEYS`), on every master of a Cluster.
 *
 * The key format these functions read is stable for 0.x: see `LockScripts.lockKey` and
 * `docs/admin.md`.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import { LockScripts } from "@sage/lock"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import {
  checkLockKey,
  type Client,
  confirmForce,
  type ForceReleaseOptions,
  namespaceKeys,
  send
} from "./internal/admin.ts"
import { commandTimeout } from "./internal/options/commandTimeout.ts"
import { unexpected } from "./internal/replies.ts"

export type { ClusterClient, Client, ForceReleaseOptions, SentinelClient, SingleNodeClient } from "./internal/admin.ts"

/**
 * What the server says about one lock.
 *
 * @category models
 * @since 0.2.0
 */
export interface LockInfo {
  /** The lock's Redis key (`<namespace>:{<key>}`). */
  readonly key: string
  /** Whether some client holds the lock now. */
  readonly held: boolean
  /** How long the current lease has left, in milliseconds, when held. */
  readonly remainingMillis: number | undefined
  /** The last fencing token issued for the lock (the holder's, when held), if the server still has it. */
  readonly lastFencingToken: number | undefined
  /** How many clients are registered as waiting for it (registrations that have lapsed are not counted). */
  readonly waiters: number
}

// One atomic read of a lock's keys (they share a hash tag, so one slot). Waiters are counted from
// when each registration lapses (KEYS[3], server ms): a waiter that died or stopped refreshing stays
// in the queue until the next script that purges it, but it no longer waits. Sent with `EVAL_RO`,
// which declares its keys read-only: a user whose keys are `%R~<namespace>:*` may run it (`EVAL`
// declares its keys read-write, so it would need write access to read).
const readScript = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call("PTTL", KEYS[1]), redis.call("GET", KEYS[2]), redis.call("ZCOUNT", KEYS[3], "(" .. string.format("%d", now), "+inf")}`

const infoOf = (key: string, reply: unknown): Effect.Effect<LockInfo, LockRedisError> => {
  if (!Array.isArray(reply) || typeof reply[0] !== "number" || typeof reply[2] !== "number") {
    return Effect.fail(unexpected("inspect", reply))
  }
  const [pttl, fence, waiters] = reply as [number, unknown, number]
  const token = typeof fence === "string" ? Number(fence) : Number.NaN
  return Effect.succeed({
    key,
    held: pttl !== -2,
    remainingMillis: pttl >= 0 ? pttl : undefined,
    lastFencingToken: Number.isSafeInteger(token) ? token : undefined,
    waiters
  })
}

/**
 * What the server says about one lock, read atomically.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LockScripts } from "@sage/lock"
 * import { LockAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * const program = Effect.gen(function* () {
 *   const info = yield* LockAdmin.inspect(client, LockScripts.lockKey("billing", "invoice:42"))
 *   yield* Effect.log(info.held ? `held for ${info.remainingMillis} ms more` : "free")
 * })
 * ```
 *
 * @category inspection
 * @since 0.2.0
 */
export const inspect = (
  client: Client,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<LockInfo, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    const lockKey = yield* checkLockKey(key)
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const [, , waitingUntil] = LockScripts.keysOf(lockKey)
    const args = ["EVAL_RO", readScript, "3", lockKey, LockScripts.fenceKey(lockKey), waitingUntil]
    return yield* infoOf(lockKey, yield* send(client, lockKey, args, timeoutMillis))
  })

/**
 * Every lock of a namespace that the servers know about (held, or free with its fencing token or
 * waiters still kept), found with `SCAN` on the node (or on every master of a Cluster), then
 * inspected. Locks that left nothing behind are not listed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LockAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * const held = LockAdmin.list(client, "billing").pipe(Effect.map((locks) => locks.filter((lock) => lock.held)))
 * ```
 *
 * @category inspection
 * @since 0.2.0
 */
export const list = (
  client: Client,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<LockInfo>, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const keys = yield* namespaceKeys(client, namespace, timeoutMillis)
    return yield* Effect.forEach(keys, (key) => inspect(client, key, { timeoutMillis }), { concurrency: 16 })
  })

/**
 * Deletes a lock's key whoever holds it. **Dangerous**: if the holder is alive, its body keeps
 * running until its next renewal finds the key gone (up to a third of its lease), while another
 * client may already hold the lock. Use it for a holder you know is dead and whose lease is too long
 * to wait out. The fence key stays, so the next holder's fencing token is still greater. Waiting
 * clients are not woken: they find the lock free at their next poll (within their backoff cap, one
 * second by default). Requires `{ force: true }`. Returns whether a lock was held.
 *
 * @example
 * ```ts
 * import { LockScripts } from "@sage/lock"
 * import { LockAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * const freed = LockAdmin.forceRelease(client, LockScripts.lockKey("billing", "invoice:42"), { force: true })
 * ```
 *
 * @category administration
 * @since 0.2.0
 */
export const forceRelease = (
  client: Client,
  key: string,
  options: ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    yield* confirmForce(options)
    const lockKey = yield* checkLockKey(key)
    const timeoutMillis = yield* commandTimeout(options.timeoutMillis, 2_000)
    const reply = yield* send(client, lockKey, ["DEL", lockKey], timeoutMillis)
    return reply === 1
  })
