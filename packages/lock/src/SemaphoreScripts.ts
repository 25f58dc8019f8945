/**
 * The semaphore protocol: the Lua scripts every backend runs for `Semaphore` (and `ReadWriteLock`),
 * each atomic on one semaphore's keys.
 *
 * A semaphore `<namespace>:{<key>}` keeps its holders in a sorted set, each holder's token scored
 * with the end of its lease in the server's milliseconds (`TIME`): a permit expires on the server's
 * clock, never a client's, and every script first drops the holders whose lease has ended. Beside
 * it, in the same hash tag:
 * - `:permits`, a hash: each holder's permits and fencing token (`<permits>:<fence>`), the
 *   semaphore's limit (`=limit`), the permits in use (`=used`, the sum over live holders, kept by
 *   every script that adds or drops a holder) and the grant reserved for each served waiter
 *   (`@<waiter id>` -> the grant's token);
 * - `:waiters` and `:waiting`, the waiter queue in arrival order and when each registration lapses,
 *   as for a lock, and `:asks`, the permits each waiter asks for;
 * - `:fence`, the last fencing token issued for the semaphore: one sequence for all its grants.
 *
 * The line is strictly first come, first served: a caller takes permits only when they are free and
 * nobody registered before it still waits, so a large request at the head of the line is never
 * starved by a stream of small ones (the small ones behind it wait for it). A release, a waiter
 * leaving, or an acquisition that finds permits free with a line ahead serves the line from its
 * head: each waiter whose request fits in the free permits is granted them (a token
 * `<waiter id>:<fence>`, for the claim window), until one does not fit. A waiter whose process is
 * gone (nobody hears its message) is passed over and keeps its place until its registration lapses.
 * A waiter that polls instead of listening (over a backend without wake-ups; its id does not begin
 * with `LockScripts.grantingWaiterPrefix` or `ownChannelWaiterPrefix`) keeps its turn: nobody behind
 * it is served until it takes its permits at its next attempt, or its registration lapses.
 *
 * The scripts are plain `EVAL` scripts, Cluster-safe (every key shares the hash tag), and need
 * Redis 7.0 or Valkey 7.2 or later, like the lock's. A limit is stored with the semaphore while any
 * holder or waiter uses it: an acquisition with a different limit is refused with both limits.
 *
 * @since 0.2.1
 */
import * as Keys from "./internal/keys.ts"
import * as Lua from "./internal/lua.ts"
import * as SemaphoreLua from "./internal/semaphoreLua.ts"

const { clock, fence, fenceStatements, holderHelpers, lineHelpers } = SemaphoreLua

/**
 * Acquire permits, idempotently, in the order waiters registered.
 *
 * - KEYS: see `keysOf` (holders, waiters, waiting, fence, permits, asks).
 * - ARGV[1]: the caller's token. ARGV[2]: the lease in milliseconds. ARGV[3]: the caller's waiter id,
 *   or "" when it will not wait. ARGV[4]: how long a registration lasts without being refreshed, in
 *   milliseconds. ARGV[5]: the semaphore's wake-up channel (`LockScripts.wakeChannel`). ARGV[6]: the
 *   publish command (`PUBLISH`, or `SPUBLISH` on Cluster). ARGV[7]: the claim window in
 *   milliseconds. ARGV[8]: the permits asked for. ARGV[9]: the limit.
 * - Reply `{1, fence}`: the caller holds its permits with the lease (a new grant, with a new fencing
 *   token; or its token already held them, an attempt whose reply was lost, and the lease is
 *   re-armed and the grant's own token returned; or a release reserved them for its waiter id, and
 *   they now hold its token with the lease and a new fencing token: the reservation may have been
 *   made for an earlier call of that waiter id that gave up, and grants since have newer tokens).
 * - Reply `{0, remaining, floor}`: not granted; `remaining` is the time until the first holder's lease
 *   ends (-2 when no holder stands in the way, only the line). With a waiter id the caller is
 *   registered (its place kept from its first registration) and `floor` is the last fencing token
 *   issued (or the server's time in microseconds, if higher).
 * - Reply `{-1, limit}`: the semaphore is in use with another limit, `limit`; nothing changed.
 *
 * @category scripting
 * @since 0.2.1
 */
export const acquire = `${clock}if redis.call("EXISTS", KEYS[1]) == 0 and redis.call("EXISTS", KEYS[2]) == 0 then
${fenceStatements}redis.call("DEL", KEYS[5])
  redis.call("ZADD", KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call("HSET", KEYS[5], "=limit", ARGV[9], "=used", ARGV[8], ARGV[1], ARGV[8] .. ":" .. string.format("%d", f))
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  redis.call("PEXPIRE", KEYS[5], ARGV[2])
  return {1, f}
end
${fence}${holderHelpers}${lineHelpers}local token, waiter = ARGV[1], ARGV[3]
local lease, count = tonumber(ARGV[2]), tonumber(ARGV[8])
local stored = redis.call("HGET", KEYS[5], "=limit")
if stored and stored ~= ARGV[9] then
  return {-1, tonumber(stored)}
end
expire_holders()
local held = redis.call("HGET", KEYS[5], token)
if held and redis.call("ZSCORE", KEYS[1], token) then
  redis.call("ZADD", KEYS[1], "XX", now + lease, token)
  keep(lease)
  return {1, tonumber(string.match(held, ":(%d+)$"))}
end
if waiter ~= "" then
  local granted = redis.call("HGET", KEYS[5], "@" .. waiter)
  if granted then
    local grant = redis.call("HGET", KEYS[5], granted)
    if grant and tonumber(string.match(grant, "^%d+")) == count then
      local fence = issue_fence()
      drop(granted)
      hold(token, count, fence, lease)
      return {1, fence}
    end
    if grant then
      drop(granted)
    end
    redis.call("HDEL", KEYS[5], "@" .. waiter)
  end
end
if not stored then
  redis.call("HSET", KEYS[5], "=limit", ARGV[9])
  keep(lease)
end
local queued = redis.call("EXISTS", KEYS[2]) == 1
local mine
if queued then
  mine = serve(ARGV[5], ARGV[6], ARGV[7], waiter)
else
  mine = true
end
if mine and count <= tonumber(ARGV[9]) - used() then
  local fence = issue_fence()
  hold(token, count, fence, lease)
  if queued then
    redis.call("ZREM", KEYS[2], waiter)
    redis.call("ZREM", KEYS[3], waiter)
    redis.call("HDEL", KEYS[6], waiter)
  end
  return {1, fence}
end
local reply = {0, -2}
local first = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
if first[2] then
  reply[2] = math.max(0, tonumber(first[2]) - now)
end
if waiter ~= "" then
  local ttl = tonumber(ARGV[4])
  redis.call("ZADD", KEYS[2], "NX", now, waiter)
  redis.call("ZADD", KEYS[3], now + ttl, waiter)
  redis.call("HSET", KEYS[6], waiter, ARGV[8])
  for _, k in ipairs({KEYS[2], KEYS[3], KEYS[6], KEYS[5]}) do
    if redis.call("PTTL", k) < ttl then
      redis.call("PEXPIRE", k, ttl)
    end
  end
  reply[3] = math.max(tonumber(redis.call("GET", KEYS[4]) or "0") or 0, now * 1000)
end
return reply
`

/**
 * Renew one holder's lease, while it still holds its permits.
 *
 * - KEYS[1]: the semaphore key. KEYS[2]: its permits hash. KEYS[3]: its fence key (`renewKeysOf`).
 *   ARGV[1]: the holder's token. ARGV[2]: the new lease in milliseconds.
 * - Reply 1: renewed (the fence key kept for `LockScripts.fenceRetentionMillis`). Reply 0: the
 *   holder's lease had ended, or it was removed (its permits are lost).
 *
 * @category scripting
 * @since 0.2.1
 */
export const renew = `${clock}local ends = redis.call("ZSCORE", KEYS[1], ARGV[1])
if ends and tonumber(ends) > now then
  local lease = tonumber(ARGV[2])
  redis.call("ZADD", KEYS[1], "XX", now + lease, ARGV[1])
  for i = 1, 2 do
    if redis.call("PTTL", KEYS[i]) < lease then
      redis.call("PEXPIRE", KEYS[i], lease)
    end
  end
  redis.call("PEXPIRE", KEYS[3], "${Lua.fenceRetentionMillis}")
  return 1
end
return 0
`

/**
 * Renew many holders' leases in one round trip (standalone, Sentinel).
 *
 * - KEYS[1..n]: the semaphore keys; KEYS[n + 1..2n]: their permits hashes; KEYS[2n + 1..3n]: their
 *   fence keys, in the same order. ARGV[1..n]: the tokens. ARGV[n + 1]: the new lease in milliseconds.
 * - Reply: n integers, 1 where renewed and 0 where that lease was lost, as `renew` answers.
 *
 * @category scripting
 * @since 0.2.1
 */
export const renewAll = `${clock}local n = #KEYS / 3
local lease = tonumber(ARGV[n + 1])
local replies = {}
for i = 1, n do
  local ends = redis.call("ZSCORE", KEYS[i], ARGV[i])
  if ends and tonumber(ends) > now then
    redis.call("ZADD", KEYS[i], "XX", now + lease, ARGV[i])
    for _, k in ipairs({KEYS[i], KEYS[n + i]}) do
      if redis.call("PTTL", k) < lease then
        redis.call("PEXPIRE", k, lease)
      end
    end
    redis.call("PEXPIRE", KEYS[2 * n + i], "${Lua.fenceRetentionMillis}")
    replies[i] = 1
  else
    replies[i] = 0
  end
end
return replies
`

/**
 * Release a holder's permits, and serve the line from its head with what is free.
 *
 * - KEYS: see `keysOf`. ARGV[1]: the token. ARGV[2]: the wake-up channel. ARGV[3]: the publish
 *   command. ARGV[4]: the claim window in milliseconds. ARGV[5], optional: the grant's fencing token.
 * - Reply 1: released. Reply 2: the holder was gone and no grant has been made on the semaphore since
 *   `ARGV[5]`'s. Reply 0: the holder was gone.
 * - The last holder's release, with nobody waiting, deletes the permits hash: nothing is left behind
 *   but the fence key.
 *
 * @category scripting
 * @since 0.2.1
 */
export const release = `${clock}local ends = redis.call("ZSCORE", KEYS[1], ARGV[1])
if ends and tonumber(ends) > now and redis.call("ZCARD", KEYS[1]) == 1 and redis.call("EXISTS", KEYS[2]) == 0 then
  redis.call("DEL", KEYS[1], KEYS[5])
  return 1
end
${fence}${holderHelpers}${lineHelpers}expire_holders()
if redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  drop(ARGV[1])
  if redis.call("EXISTS", KEYS[2]) == 1 then
    serve(ARGV[2], ARGV[3], ARGV[4], false)
  end
  tidy()
  return 1
end
if ARGV[5] and tonumber(redis.call("GET", KEYS[4]) or "") == tonumber(ARGV[5]) then
  return 2
end
return 0
`

/**
 * Leave the line (a waiter gave up), handing back a grant reserved for it and not taken yet, and
 * serve the line with what that frees.
 *
 * - KEYS: see `keysOf`. ARGV[1]: the waiter id. ARGV[2..4]: as for `release`.
 * - Reply 1 when the waiter was registered (or had a grant reserved), 0 otherwise.
 *
 * @category scripting
 * @since 0.2.1
 */
export const leave = `${clock}${fence}${holderHelpers}${lineHelpers}local waiter = ARGV[1]
local removed = redis.call("ZREM", KEYS[2], waiter)
redis.call("ZREM", KEYS[3], waiter)
redis.call("HDEL", KEYS[6], waiter)
local granted = redis.call("HGET", KEYS[5], "@" .. waiter)
if granted then
  if redis.call("ZSCORE", KEYS[1], granted) then
    removed = 1
  end
  drop(granted)
  redis.call("HDEL", KEYS[5], "@" .. waiter)
end
if removed == 1 and redis.call("EXISTS", KEYS[2]) == 1 then
  expire_holders()
  serve(ARGV[2], ARGV[3], ARGV[4], false)
end
tidy()
return removed
`

/**
 * Check: a holder's remaining lease (a read; it changes nothing).
 *
 * - KEYS[1]: the semaphore key. ARGV[1]: the token.
 * - Reply: the remaining lease in milliseconds when the token holds permits, -2 otherwise.
 *
 * @category scripting
 * @since 0.2.1
 */
export const check = `${clock}local ends = redis.call("ZSCORE", KEYS[1], ARGV[1])
if ends and tonumber(ends) > now then
  return tonumber(ends) - now
end
return -2
`

/**
 * The keys the acquire, release and leave scripts declare, in `KEYS` order: the semaphore key (its
 * holders), its waiters, when their registrations lapse, its fence key, its permits hash and its
 * waiters' asks. All share the semaphore key's hash tag.
 *
 * @category scripting
 * @since 0.2.1
 */
export const keysOf = (semaphoreKey: string): readonly [string, string, string, string, string, string] => [
  semaphoreKey,
  Keys.waitersKey(semaphoreKey),
  Keys.waitingUntilKey(semaphoreKey),
  Keys.fenceKey(semaphoreKey),
  Keys.permitsKey(semaphoreKey),
  Keys.asksKey(semaphoreKey)
]

/**
 * The keys the renew script declares, in `KEYS` order: the semaphore key, its permits hash and its
 * fence key.
 *
 * @category scripting
 * @since 0.2.1
 */
export const renewKeysOf = (semaphoreKey: string): readonly [string, string, string] => [
  semaphoreKey,
  Keys.permitsKey(semaphoreKey),
  Keys.fenceKey(semaphoreKey)
]

/**
 * The permits hash of a semaphore (see the module's header).
 *
 * @category keys
 * @since 0.2.1
 */
export const permitsKey = (semaphoreKey: string): string => Keys.permitsKey(semaphoreKey)
