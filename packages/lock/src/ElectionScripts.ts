/**
 * The election protocol: the Lua scripts that publish and read who leads an election.
 *
 * An election is a lock (`LockScripts`): its holder leads, and the grant's fencing token is the
 * term. Beside the lock's keys, one hash (`leaderKey`) holds what the leader proclaimed: its term,
 * candidate id, value, when the term was first proclaimed (server ms) and a revision that counts the
 * proclamations of the term. Every script declares the lock key, its fence key and the leader key in
 * `KEYS`; they share the lock's hash tag, so they are Cluster-safe.
 *
 * A proclamation counts only while its term leads: the lock key exists and the fence key (the last
 * token issued) equals the term. No later grant can exist then, and the only holder a key with that
 * fence can have is the grant that issued it. Reads apply the same test, so a record left by an
 * earlier term is never reported as the leader.
 *
 * Observers hear of changes on the lock's wake-up channel (`LockScripts.wakeChannel`), as a message
 * naming `observerId`; candidates waiting for the lock listen on channels of their own, so the two
 * never mix.
 *
 * @since 0.2.1
 */
import type { ElectionView } from "./LockBackend.ts"
import * as Keys from "./internal/keys.ts"
import { fenceRetentionMillis } from "./internal/lua.ts"

/**
 * The name observers of an election wait on, on the lock's wake-up channel: every proclamation and
 * every announcement publishes it.
 *
 * @category scripting
 * @since 0.2.1
 */
export const observerId = "observers"

/**
 * The leader record of an election whose lock key is `lockKey` (a hash in the same hash tag).
 *
 * @category scripting
 * @since 0.2.1
 */
export const leaderKey = (lockKey: string): string => `${lockKey}:leader`

/**
 * `KEYS` of every election script: the lock key, its fence key and its leader record.
 *
 * @category scripting
 * @since 0.2.1
 */
export const keysOf = (lockKey: string): readonly [string, string, string] => [
  lockKey,
  Keys.fenceKey(lockKey),
  leaderKey(lockKey)
]

/**
 * How long a leader record is kept after its last proclamation: as long as a fence key
 * (`LockScripts.fenceRetentionMillis`). A term that lasts longer without proclaiming reads as
 * unproclaimed until its leader proclaims again.
 *
 * @category scripting
 * @since 0.2.1
 */
export const recordRetentionMillis: number = fenceRetentionMillis

/**
 * Proclaim, while the term leads.
 *
 * - KEYS: `keysOf(lock key)`.
 * - ARGV[1]: the term (the grant's fencing token). ARGV[2]: the candidate id. ARGV[3]: the value.
 *   ARGV[4]: the lock's wake-up channel. ARGV[5]: the publish command (`PUBLISH`, or `SPUBLISH` on
 *   Cluster). ARGV[6]: the observers' name (`observerId`).
 * - Reply 1: the term leads; the record now holds the value. The term's first proclamation writes
 *   the whole record (`since` is the server's time, `revision` 1); later ones write the value and add
 *   one to `revision`. Observers are told.
 * - Reply 0: the term no longer leads (the lock expired, was released, or was granted again);
 *   nothing changed.
 *
 * @category scripting
 * @since 0.2.1
 */
export const proclaim = `if redis.call("EXISTS", KEYS[1]) == 0 or tonumber(redis.call("GET", KEYS[2]) or "") ~= tonumber(ARGV[1]) then
  return 0
end
if redis.call("HGET", KEYS[3], "term") == ARGV[1] then
  redis.call("HSET", KEYS[3], "value", ARGV[3])
  redis.call("HINCRBY", KEYS[3], "revision", 1)
else
  local t = redis.call("TIME")
  local us = t[2]
  redis.call("DEL", KEYS[3])
  redis.call("HSET", KEYS[3], "term", ARGV[1], "candidate", ARGV[2], "value", ARGV[3], "since", t[1] .. string.sub(string.rep("0", 6 - #us) .. us, 1, 3), "revision", "1")
end
redis.call("PEXPIRE", KEYS[3], "${recordRetentionMillis}")
redis.call(ARGV[5], ARGV[4], ARGV[6])
return 1
`

/**
 * Read who leads, changing nothing.
 *
 * - KEYS: `keysOf(lock key)`.
 * - Reply `{0}`: nobody holds the lock.
 * - Reply `{1, term, candidate, value, since, revision}`: the holder's term proclaimed this record.
 * - Reply `{2, term}`: the lock is held, but its term has not proclaimed yet (it was granted a moment
 *   ago, or its record expired); `term` is the last token issued, "" if the fence key is gone.
 *
 * @category scripting
 * @since 0.2.1
 */
export const read = `if redis.call("EXISTS", KEYS[1]) == 0 then
  return {0}
end
local fence = redis.call("GET", KEYS[2])
local record = redis.call("HMGET", KEYS[3], "term", "candidate", "value", "since", "revision")
if fence and record[1] and tonumber(record[1]) == tonumber(fence) then
  return {1, record[1], record[2], record[3], record[4], record[5]}
end
return {2, fence or ""}
`

/**
 * Tell the election's observers to read again (after a resignation, which may leave nobody
 * leading), changing nothing.
 *
 * - KEYS: `keysOf(lock key)` (declared so the call is routed to the election's node).
 * - ARGV[1]: the wake-up channel. ARGV[2]: the publish command. ARGV[3]: the observers' name.
 * - Reply: the number of connections that heard it.
 *
 * @category scripting
 * @since 0.2.1
 */
export const announce = `return redis.call(ARGV[2], ARGV[1], ARGV[3])
`

/**
 * The reply of `read` as an `ElectionView`, or `undefined` when it is not one (the backend reports
 * that as an unexpected reply).
 *
 * @example
 * ```ts
 * import { ElectionScripts } from "@sage/lock"
 *
 * ElectionScripts.viewOf([0]) // { _tag: "Vacant" }
 * ElectionScripts.viewOf([2, "1765000000000001"]) // { _tag: "Unproclaimed", term: 1765000000000001 }
 * ```
 *
 * @category scripting
 * @since 0.2.1
 */
export const viewOf = (reply: unknown): ElectionView | undefined => {
  if (!Array.isArray(reply)) return undefined
  const kind = Number(reply[0])
  if (kind === 0) return vacant
  if (kind === 2) {
    const term = reply[1] === "" ? 0 : Number(reply[1])
    return Number.isSafeInteger(term) && term >= 0 ? { _tag: "Unproclaimed", term } : undefined
  }
  if (kind !== 1 || reply.length !== 6) return undefined
  const term = Number(reply[1])
  const since = Number(reply[4])
  const revision = Number(reply[5])
  if (!Number.isSafeInteger(term) || !Number.isSafeInteger(since) || !Number.isSafeInteger(revision)) return undefined
  return {
    _tag: "Leading",
    record: { term, candidate: String(reply[2]), value: String(reply[3]), since, revision }
  }
}

const vacant: ElectionView = { _tag: "Vacant" }
