// The semaphore admin functions over any client (`AdminTarget`): SemaphoreAdmin.ts offers them over
// node-redis clients, CommandAdmin.ts over any other.
import * as Effect from "effect/Effect"
import { LockScripts, SemaphoreScripts } from "@sage/lock"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import { commandTimeout } from "../options/commandTimeout.ts"
import { valueText } from "../options/valueText.ts"
import { unexpected } from "../replies.ts"
import { claimMillis } from "../scripts.ts"
import { type AdminTarget, checkLockKey, confirmForce, type ForceReleaseOptions, namespaceKeys } from "./target.ts"

/**
 * One holder of a semaphore's permits.
 *
 * @category models
 * @since 0.2.1
 */
export interface SemaphoreHolder {
  /** The holder's token (what `forceRelease` takes). */
  readonly token: string
  readonly permits: number
  /** The fencing token of its grant. */
  readonly fencingToken: number | undefined
  /** How long its lease has left, in milliseconds (the server's clock). */
  readonly remainingMillis: number
}

/**
 * One waiter in a semaphore's line, in arrival order.
 *
 * @category models
 * @since 0.2.1
 */
export interface SemaphoreWaiter {
  readonly id: string
  /** How many permits it asks for. */
  readonly permits: number
}

/**
 * What the server says about one semaphore (or read-write lock).
 *
 * @category models
 * @since 0.2.1
 */
export interface SemaphoreInfo {
  /** The semaphore's Redis key (`<namespace>:{<key>}`). */
  readonly key: string
  /** The limit stored while the semaphore is in use. */
  readonly limit: number | undefined
  /** The permits held now (the sum over live holders). */
  readonly used: number
  /** The live holders, soonest lease end first. */
  readonly holders: ReadonlyArray<SemaphoreHolder>
  /** The waiters whose registration has not lapsed, in arrival order. */
  readonly waiters: ReadonlyArray<SemaphoreWaiter>
  /** The last fencing token issued for the semaphore, if the server still has it. */
  readonly lastFencingToken: number | undefined
}

// One atomic read of a semaphore's keys (see `SemaphoreScripts` for their layout), read-only like
// `readScript`. A key of another type (a lock's string) answers its type alone.
const readSemaphoreScript = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind = redis.call("TYPE", KEYS[1])["ok"]
if kind ~= "zset" and kind ~= "none" then
  return {kind}
end
local live = redis.call("ZRANGEBYSCORE", KEYS[1], "(" .. string.format("%d", now), "+inf", "WITHSCORES")
local holders = {}
for i = 1, #live, 2 do
  local ends = string.format("%d", tonumber(live[i + 1]) - now)
  holders[#holders + 1] = {live[i], redis.call("HGET", KEYS[2], live[i]) or "", ends}
end
local waiters = {}
for _, id in ipairs(redis.call("ZRANGE", KEYS[4], 0, -1)) do
  local lapses = redis.call("ZSCORE", KEYS[5], id)
  if lapses and tonumber(lapses) > now then
    waiters[#waiters + 1] = {id, redis.call("HGET", KEYS[6], id) or "1"}
  end
end
return {"zset", redis.call("HGET", KEYS[2], "=limit") or "", redis.call("GET", KEYS[3]) or "", holders, waiters}`

const wholeNumber = (text: unknown): number | undefined => {
  const value = typeof text === "string" && text !== "" ? Number(text) : Number.NaN
  return Number.isSafeInteger(value) ? value : undefined
}

const isStringArray = (value: unknown): value is ReadonlyArray<string> =>
  Array.isArray(value) && value.every((item) => typeof item === "string")

/** The reply of `readSemaphoreScript`, or the type the key has instead. */
const semaphoreInfoOf = (key: string, reply: unknown): Effect.Effect<SemaphoreInfo | string, LockRedisError> => {
  if (!Array.isArray(reply) || typeof reply[0] !== "string") return Effect.fail(unexpected("inspect", reply))
  if (reply[0] !== "zset") return Effect.succeed(reply[0])
  const [, limit, fence, holders, waiters] = reply as [string, unknown, unknown, unknown, unknown]
  if (!Array.isArray(holders) || !holders.every(isStringArray) || !Array.isArray(waiters)) {
    return Effect.fail(unexpected("inspect", reply))
  }
  if (!waiters.every(isStringArray)) return Effect.fail(unexpected("inspect", reply))
  const held = holders.map(([token, value, remaining]): SemaphoreHolder => {
    const [permits, fencingToken] = (value ?? "").split(":")
    return {
      token: token!,
      permits: wholeNumber(permits) ?? 0,
      fencingToken: wholeNumber(fencingToken),
      remainingMillis: wholeNumber(remaining) ?? 0
    }
  })
  return Effect.succeed({
    key,
    limit: wholeNumber(limit),
    used: held.reduce((sum, holder) => sum + holder.permits, 0),
    holders: held,
    waiters: waiters.map(([id, permits]) => ({ id: id!, permits: wholeNumber(permits) ?? 1 })),
    lastFencingToken: wholeNumber(fence)
  })
}

const readSemaphore = (
  target: AdminTarget,
  key: string,
  timeoutMillis: number
): Effect.Effect<SemaphoreInfo | string, LockRedisError> => {
  const [holders, waiters, waiting, fence, permits, asks] = SemaphoreScripts.keysOf(key)
  const args = ["EVAL_RO", readSemaphoreScript, "6", holders, permits, fence, waiters, waiting, asks]
  return Effect.flatMap(target.send(key, args, timeoutMillis), (reply) => semaphoreInfoOf(key, reply))
}

/** See `SemaphoreAdmin.inspect`. */
export const inspect = (
  target: AdminTarget,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<SemaphoreInfo, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    const semaphoreKey = yield* checkLockKey(key)
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const info = yield* readSemaphore(target, semaphoreKey, timeoutMillis)
    if (typeof info !== "string") return info
    return yield* Effect.fail(
      new InvalidArgument({
        field: "key",
        value: JSON.stringify(key),
        reason: `not a semaphore: the key holds a ${info} (a lock's key holds a string; see LockAdmin.inspect)`
      })
    )
  })

/** See `SemaphoreAdmin.list`. */
export const list = (
  target: AdminTarget,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<SemaphoreInfo>, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const keys = yield* namespaceKeys(target, namespace, timeoutMillis)
    const infos = yield* Effect.forEach(keys, (key) => readSemaphore(target, key, timeoutMillis), { concurrency: 16 })
    // A key of another type is a lock; one with no holder, no waiter and no stored limit has left
    // only its fence key, and could as well be a released lock's.
    return infos.filter(
      (info): info is SemaphoreInfo =>
        typeof info !== "string" && (info.holders.length > 0 || info.waiters.length > 0 || info.limit !== undefined)
    )
  })

/** See `SemaphoreAdmin.forceRelease`. */
export const forceRelease = (
  target: AdminTarget,
  key: string,
  token: string,
  options: ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    yield* confirmForce(options)
    const semaphoreKey = yield* checkLockKey(key)
    if (typeof token !== "string" || token.length === 0) {
      return yield* Effect.fail(
        new InvalidArgument({ field: "token", value: valueText(token), reason: "must be a holder's token" })
      )
    }
    const timeoutMillis = yield* commandTimeout(options.timeoutMillis, 2_000)
    const publish = target.sharded ? "SPUBLISH" : "PUBLISH"
    const args = [
      "EVAL",
      SemaphoreScripts.release,
      "6",
      ...SemaphoreScripts.keysOf(semaphoreKey),
      token,
      LockScripts.wakeChannel(semaphoreKey),
      publish,
      String(claimMillis)
    ]
    return (yield* target.send(semaphoreKey, args, timeoutMillis)) === 1
  })
