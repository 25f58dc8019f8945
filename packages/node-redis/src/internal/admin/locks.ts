// The lock admin functions over any client (`AdminTarget`): LockAdmin.ts offers them over
// node-redis clients, CommandAdmin.ts over any other.
import * as Effect from "effect/Effect"
import { LockScripts } from "@sage/lock"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { commandTimeout } from "../options/commandTimeout.ts"
import { unexpected } from "../replies.ts"
import { type AdminTarget, checkLockKey, confirmForce, type ForceReleaseOptions, namespaceKeys } from "./target.ts"

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

/** See `LockAdmin.inspect`. */
export const inspect = (
  target: AdminTarget,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<LockInfo, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    const lockKey = yield* checkLockKey(key)
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const [, , waitingUntil] = LockScripts.keysOf(lockKey)
    const args = ["EVAL_RO", readScript, "3", lockKey, LockScripts.fenceKey(lockKey), waitingUntil]
    return yield* infoOf(lockKey, yield* target.send(lockKey, args, timeoutMillis))
  })

/** See `LockAdmin.list`. */
export const list = (
  target: AdminTarget,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<LockInfo>, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const keys = yield* namespaceKeys(target, namespace, timeoutMillis)
    return yield* Effect.forEach(keys, (key) => inspect(target, key, { timeoutMillis }), { concurrency: 16 })
  })

/** See `LockAdmin.forceRelease`. */
export const forceRelease = (
  target: AdminTarget,
  key: string,
  options: ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    yield* confirmForce(options)
    const lockKey = yield* checkLockKey(key)
    const timeoutMillis = yield* commandTimeout(options.timeoutMillis, 2_000)
    const reply = yield* target.send(lockKey, ["DEL", lockKey], timeoutMillis)
    return reply === 1
  })
