/**
 * The lock protocol: the Lua scripts every backend runs, each atomic on one lock's keys.
 *
 * They are plain `EVAL` scripts without a `#!lua` shebang on purpose: under `maxmemory` with
 * `noeviction`, Redis and Valkey check memory per command inside such scripts, so `GET`, `PEXPIRE`
 * and `DEL` keep working and a held lock can still be renewed and released, while the `SET` of a new
 * acquisition fails with `OOM` (a shebang script would need `flags=allow-oom` to renew at all).
 *
 * Each script touches one lock: its key and, for acquire, transfer, release and leave, the two queue
 * keys of its waiters and its fence key, all declared in `KEYS` and sharing one hash tag, so they
 * are Cluster-safe. While a slot migrates, a script whose keys are split between the two nodes gets
 * `TRYAGAIN`, which the lock retries like any temporary refusal. Only `renewAll` spans several
 * locks (standalone, Sentinel); `fencedSet` touches no lock at all: it guards the application's own
 * data with a fencing token.
 *
 * @since 0.1.0
 */
import * as Keys from "./internal/keys.ts"
import * as Lua from "./internal/lua.ts"

const { fenceHelper, queueHelpers, wakeHead, firstInLine } = Lua

/**
 * How long a lock's fence key (the last fencing token issued) is kept after the last acquisition or
 * renewal: 7 days, refreshed by both, so a lock held for longer keeps it. One small key per lock key
 * used within that time.
 *
 * **Details**
 * After the fence key expires (or is evicted or lost in a failover), tokens continue from the
 * server-time floor (microseconds since the epoch), which is far above any token issued a week
 * earlier unless the server clock was set back by about as much. See `docs/fencing.md`.
 *
 * @category scripting
 * @since 0.2.0
 */
export const fenceRetentionMillis: number = Lua.fenceRetentionMillis

/**
 * How the id of a waiter that accepts grants begins. A release (or a waiter leaving) whose queue
 * head has such an id hands the lock straight to it instead of waking it to ask: the key is set to
 * `<waiter id>:<fence>` for the claim window, and the message names that token and the window
 * (`<waiter id>:<fence>:<claim ms>`), on the waiter's own channel (`grantChannel`). The waiter then
 * holds the lock without another round trip. Waiters of backends that wait for replica
 * acknowledgement never use this prefix (a grant written by a release is not acknowledged), and
 * neither do older clients, which are woken as before.
 *
 * @category scripting
 * @since 0.2.0
 */
export const grantingWaiterPrefix: string = Lua.grantingWaiterPrefix

/**
 * How the id of a waiter that is woken on a channel of its own begins (the waiters of backends
 * without grants: Sentinel, Cluster, in memory). A release names such a waiter on its own channel
 * (`grantChannel`, the message its id alone) rather than on the lock's shared channel, which every
 * waiting process hears; and since only that waiter listens there, a release can tell from the
 * message's reach whether the waiter's process is still there (see `release`). Clients of earlier
 * versions use plain ids and are woken on the shared channel.
 *
 * @category scripting
 * @since 0.2.0
 */
export const ownChannelWaiterPrefix: string = Lua.ownChannelWaiterPrefix

/**
 * The token a release writes into the lock key when it hands the lock to a waiter (see
 * `grantingWaiterPrefix`): the waiter id and the grant's fencing token.
 *
 * @category scripting
 * @since 0.2.0
 */
export const grantToken = (waiterId: string, fence: number): string => `${waiterId}:${fence}`

/**
 * Acquire, idempotently, in the order waiters registered.
 *
 * - KEYS[1]: the lock key. KEYS[2]: its waiters in arrival order (ZSET, id -> first registration).
 *   KEYS[3]: when each registration lapses (ZSET, id -> server ms). KEYS[4]: the fence key, the last
 *   fencing token issued for the lock. See `acquireKeysOf`.
 * - ARGV[1]: the caller's token. ARGV[2]: the lease in milliseconds. ARGV[3]: the caller's waiter id,
 *   or "" when it will not wait (`tryWithLock`, or a backend without wake-ups). ARGV[4]: how long a
 *   registration lasts without being refreshed, in milliseconds.
 * - Reply `{1, fence}`: the key was free (and no earlier waiter was registered, or the caller is the
 *   earliest) and now holds the token with the lease; or it already held the token (an earlier
 *   attempt whose reply was lost had succeeded) and its lease was re-armed. The caller's
 *   registration, if any, is removed. `fence` is the grant's fencing token: for a new grant,
 *   `max(last + 1, server time in microseconds)`, stored in the fence key for `fenceRetentionMillis`;
 *   for a re-armed grant, the token the lost reply carried (the fence key's value), so a retry never
 *   changes it (a fence key lost meanwhile gets a new, higher token).
 *   The time floor keeps tokens increasing when the fence key is gone (retention, eviction, a
 *   failover that lost it): the next token is still above every earlier one unless the server's
 *   clock is behind the last token's microsecond.
 * - A key that a release handed to the caller's waiter id (it holds `grantToken(waiter id, fence)`)
 *   is taken as well: it then holds the caller's token with the lease, and the reply is `{1, fence}`
 *   with the grant's fence. That is how a waiter that missed the grant's message still gets it.
 * - Reply `{0, pttl}`: another token holds it; `pttl` is its remaining lease in milliseconds (-1
 *   when the key has no expiry, which only happens when something else wrote it).
 * - Reply `{0, -2}`: the key is free, but an earlier registered waiter has the next turn.
 * - ARGV[5..7], optional: the lock's wake-up channel (`wakeChannel`), the publish command (`PUBLISH`,
 *   or `SPUBLISH` on Cluster) and the claim window in milliseconds, as a release gets them. With
 *   them, a free key with waiters ahead of the caller (the key expired or was deleted: no release
 *   served anyone) goes to the first of them that can take it: one already served within the claim
 *   window keeps its turn while anybody listens on its channel (asked with `<id>:next:<claim ms>`),
 *   one not yet served is woken (its id) and its registration cut to the claim window, and one
 *   nobody listens for (its process is gone) is passed over, keeping its place. Only a waiter with a
 *   channel of its own (`grantingWaiterPrefix`, `ownChannelWaiterPrefix`) can be asked; a plain id
 *   (an earlier version) always keeps its turn. Without them, the head of the line has the turn.
 * - With a waiter id, a busy reply also registers (or refreshes) the caller: its place in line is
 *   kept from its first registration; the queue keys expire when nobody refreshes them. The reply
 *   then has a third element, the fence floor: the last fencing token issued (or the server time in
 *   microseconds, if higher). A grant the waiter hears of later is only new if its fence is above it.
 * - A non-string key fails with `WRONGTYPE`: the namespace is shared with other data.
 * - Needs Redis 7.0 or Valkey 7.2 or later (`SET` with both `NX` and `GET`).
 *
 * @category scripting
 * @since 0.1.0
 */
export const acquire = `${fenceHelper}local queued = redis.call("EXISTS", KEYS[2]) == 1
local current
if queued then
  current = redis.call("GET", KEYS[1])
else
  current = redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2], "GET")
  if current == false then
    return {1, issue_fence()}
  end
end
${queueHelpers}local waiter = ARGV[3]
if current == ARGV[1] or (waiter ~= "" and current and string.sub(current, 1, #waiter + 1) == waiter .. ":") then
  if current ~= ARGV[1] then
    redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  else
    redis.call("PEXPIRE", KEYS[1], ARGV[2])
  end
  return {1, tonumber(redis.call("GET", KEYS[4]) or "") or issue_fence()}
end
${firstInLine}local now = nil
if current == false then
  local mine = true
  if queued then
    now = now_ms()
    purge(now)
    mine = first_in_line(now)
  end
  if mine then
    redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
    if queued and waiter ~= "" then
      redis.call("ZREM", KEYS[2], waiter)
      redis.call("ZREM", KEYS[3], waiter)
    end
    return {1, issue_fence()}
  end
end
local reply = {0, -2}
if current ~= false then
  reply = {0, redis.call("PTTL", KEYS[1])}
end
if waiter ~= "" then
  now = now or now_ms()
  local ttl = tonumber(ARGV[4])
  redis.call("ZADD", KEYS[2], "NX", now, waiter)
  redis.call("ZADD", KEYS[3], now + ttl, waiter)
  for i = 2, 3 do
    if redis.call("PTTL", KEYS[i]) < ttl then
      redis.call("PEXPIRE", KEYS[i], ttl)
    end
  end
  reply[3] = math.max(tonumber(redis.call("GET", KEYS[4]) or "0") or 0, now * 1000)
end
return reply
`

/**
 * Renew: extend the lease only while the key still holds the caller's token.
 *
 * - KEYS[1]: the lock key. KEYS[2]: its fence key (`fenceKey`). ARGV[1]: the token. ARGV[2]: the
 *   new lease in milliseconds.
 * - Reply 1: renewed, and the fence key kept for another `fenceRetentionMillis`, so a lock held for
 *   longer than that keeps its last fencing token. Reply 0: the key is gone or holds another token
 *   (ownership lost).
 *
 * @category scripting
 * @since 0.1.0
 */
export const renew = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[2], "${fenceRetentionMillis}")
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
`

/**
 * The keys the renew script declares, in `KEYS` order: the lock key and its fence key (one hash tag).
 *
 * @category scripting
 * @since 0.2.0
 */
export const renewKeysOf = (lockKey: string): readonly [string, string] => [lockKey, Keys.fenceKey(lockKey)]

/**
 * Release: compare-and-delete, so a caller never deletes a lock that has passed to someone else, and
 * wake the longest-waiting registered waiter, if any.
 *
 * - KEYS[1..4]: as for `acquire`. ARGV[1]: the token. ARGV[2]: the wake-up channel. ARGV[3]: the
 *   publish command, `PUBLISH` (standalone, Sentinel) or `SPUBLISH` (Cluster: the message stays on
 *   the key's shard, which the channel's hash tag shares). ARGV[4]: how long the head waiter has to
 *   claim the lock, in milliseconds.
 * - ARGV[5], optional: the fencing token the lease was granted with (the lock sends it with every
 *   release of a lease it holds; older versions sent it only when retrying a release
 *   whose earlier attempt may have run). A key that is gone while the fence key still holds that
 *   token (no grant since: nobody else can have held the lock) then answers 2.
 * - Reply 1: released. Reply 2: already gone, with no grant since `ARGV[5]`'s: deleted by an earlier
 *   attempt of the same release (which woke the head), or expired or deleted otherwise (nobody is
 *   woken: waiters find the key free at their next attempt). Reply 0: the key was gone or held
 *   another token (nobody is woken).
 * - Only the head of the queue is told: one release sends one waiter on. A head whose id begins with
 *   `grantingWaiterPrefix` is handed the lock: the key holds `grantToken(head, fence)` for the claim
 *   window (a new fence is issued, as an acquisition would) and the message, on the head's own
 *   channel (`grantChannel`, so other processes are not woken), is that token and the window,
 *   `<head>:<fence>:<claim ms>`. The head starts at once and renews the key to its own lease. A
 *   head whose id begins with `ownChannelWaiterPrefix` is named on its own channel (its id alone)
 *   and its registration is cut to the claim window; so is any other head, on the lock's shared
 *   channel (ARGV[2]).
 * - A head of either prefix whose message reaches nobody (its process is gone, or it has not
 *   subscribed yet) keeps its place and is passed over: the next one in line is served by the same
 *   release (among the first 16). A woken waiter served past others is moved to the head of the
 *   line (its score in KEYS[2] set below the first's), so its acquire is not refused as "queued".
 * - The first waiter behind the one served that hears it gets `<id>:next:<claim ms>` (on its own
 *   channel when it has one): if the head never claims (its process died after the message), that
 *   waiter asks again when the window ends, so a dead head holds up the line for the claim window at
 *   most.
 *
 * @category scripting
 * @since 0.1.0
 */
export const release = `local current = redis.call("GET", KEYS[1])
if current ~= ARGV[1] then
  if current == false and ARGV[5] and tonumber(redis.call("GET", KEYS[4]) or "") == tonumber(ARGV[5]) then
    return 2
  end
  return 0
end
redis.call("DEL", KEYS[1])
if redis.call("EXISTS", KEYS[2]) == 1 then
${wakeHead}end
return 1
`

/**
 * Transfer: hand a held lock straight to another caller of the same client, without freeing it in
 * between (one round trip instead of a release and an acquisition).
 *
 * - KEYS[1..4]: as for `acquire`. ARGV[1]: the holder's token. ARGV[2]: the successor's token.
 *   ARGV[3]: the successor's lease in milliseconds. ARGV[4]: the client's waiter id, or "".
 * - Reply `{1, fence, others}`: the key now holds the successor's token with a fresh lease, and
 *   `fence` is the new grant's fencing token (issued as `acquire` issues one). The client's waiter
 *   registration, if any, is removed, as a grant does. `others` is 1 when waiters remain registered
 *   (other clients wait for the key): the client uses it to bound how often in a row it keeps the
 *   key for its own callers. A retry after a lost reply finds the successor's token: the lease is
 *   re-armed and the same fence is returned, so the transfer is idempotent like `acquire`.
 * - Reply `{0}`: the key was gone or held another token; nothing changed (the holder lost it).
 * - Nobody is woken: the lock never becomes free.
 *
 * @category scripting
 * @since 0.2.0
 */
export const transfer = `${fenceHelper}local current = redis.call("GET", KEYS[1])
local fence
if current == ARGV[2] then
  redis.call("PEXPIRE", KEYS[1], ARGV[3])
  fence = tonumber(redis.call("GET", KEYS[4]) or "") or issue_fence()
elseif current == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
  fence = issue_fence()
else
  return {0}
end
local others = 0
if redis.call("EXISTS", KEYS[2]) == 1 then
  if ARGV[4] ~= "" then
    redis.call("ZREM", KEYS[2], ARGV[4])
    redis.call("ZREM", KEYS[3], ARGV[4])
  end
  others = redis.call("EXISTS", KEYS[2])
end
return {1, fence, others}
`

/**
 * Leave the waiter queue (a waiter gave up), and give the next waiter its turn if the lock is free.
 *
 * - KEYS[1..4]: as for `acquire`. ARGV[1]: the waiter id. ARGV[2..4]: as for `release`.
 * - A grant the waiter had not taken yet (the key holds `grantToken(waiter id, fence)`) is freed
 *   and passes on to the next waiter as a release would.
 * - Reply 1 when the waiter was registered (or held a grant), 0 otherwise.
 *
 * @category scripting
 * @since 0.2.0
 */
export const leave = `local waiter = ARGV[1]
local removed = redis.call("ZREM", KEYS[2], waiter)
redis.call("ZREM", KEYS[3], waiter)
local current = redis.call("GET", KEYS[1])
if current and string.sub(current, 1, #waiter + 1) == waiter .. ":" then
  redis.call("DEL", KEYS[1])
  current = false
  removed = 1
end
if removed == 1 and current == false and redis.call("EXISTS", KEYS[2]) == 1 then
${wakeHead}end
return removed
`

/**
 * The Redis key of a lock: `<namespace>:{<key>}`, where `<key>` is the key codec's text with `%`, `{`
 * and `}` escaped as `%25`, `%7B` and `%7D`. The braces are a Cluster hash tag: every companion key
 * (`:waiters`, `:waiting`, `:fence`) and the wake-up channel (`:wake`) append to it and share its
 * slot. This format is stable for 0.x, so tools (`LockAdmin`, your own scripts) can find locks.
 *
 * @example
 * ```ts
 * import { LockScripts } from "@sage/lock"
 *
 * const key = LockScripts.lockKey("billing", "invoice:42") // "billing:{invoice:42}"
 * ```
 *
 * @category keys
 * @since 0.2.0
 */
export const lockKey = (namespace: string, key: string): string => Keys.lockKey(namespace, key)

/**
 * The keys a lock's scripts declare, in `KEYS` order: the lock key, then its waiter queue keys.
 * All share the lock key's hash tag, so they live on one Cluster slot.
 *
 * @category scripting
 * @since 0.2.0
 */
export const keysOf = (lockKey: string): readonly [string, string, string] => [
  lockKey,
  Keys.waitersKey(lockKey),
  Keys.waitingUntilKey(lockKey)
]

/**
 * The keys the acquire script declares, in `KEYS` order: those of `keysOf`, then the fence key.
 * All share the lock key's hash tag, so they live on one Cluster slot.
 *
 * @category scripting
 * @since 0.2.0
 */
export const acquireKeysOf = (lockKey: string): readonly [string, string, string, string] => [
  lockKey,
  Keys.waitersKey(lockKey),
  Keys.waitingUntilKey(lockKey),
  Keys.fenceKey(lockKey)
]

/**
 * The fence key of a lock: the last fencing token issued for it, kept for `fenceRetentionMillis`
 * after the last acquisition.
 *
 * @category scripting
 * @since 0.2.0
 */
export const fenceKey = (lockKey: string): string => Keys.fenceKey(lockKey)

/**
 * Check: whether the lock key still holds the caller's token (a read; it changes nothing).
 *
 * - KEYS[1]: the lock key. ARGV[1]: the token.
 * - Reply: the key's remaining lease in milliseconds (>= 0, or -1 without expiry) when it holds the
 *   token; -2 when it is gone or holds another token.
 *
 * @category scripting
 * @since 0.2.0
 */
export const check = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PTTL", KEYS[1])
end
return -2
`

/**
 * The channel on which releases of `lockKey` wake its waiters.
 *
 * @category scripting
 * @since 0.2.0
 */
export const wakeChannel = (lockKey: string): string => Keys.wakeChannel(lockKey)

/**
 * The channel on which releases of `lockKey` hand the lock to the granting waiter `waiterId` (see
 * `grantingWaiterPrefix`): its own, so that a release wakes only the process it concerns.
 *
 * @category scripting
 * @since 0.2.0
 */
export const grantChannel = (lockKey: string, waiterId: string): string => `${Keys.wakeChannel(lockKey)}:${waiterId}`

/**
 * Renew many leases in one round trip (standalone and Sentinel: every key lives on one node).
 *
 * - KEYS[1..n]: the lock keys; KEYS[n + 1..2n]: their fence keys, in the same order. ARGV[1..n]:
 *   their tokens, in the same order. ARGV[n + 1]: the new lease in milliseconds.
 * - Reply: an array of n integers, 1 where the key still held its token and was renewed (its fence
 *   key kept, as `renew` does), 0 where it was gone or held another token (that lease is lost; the
 *   others are unaffected).
 * - Cluster cannot run it across slots (`CROSSSLOT`); there each node gets a pipeline of `renew`.
 *
 * @category scripting
 * @since 0.2.0
 */
export const renewAll = `local n = #KEYS / 2
local lease = ARGV[n + 1]
local replies = {}
for i = 1, n do
  if redis.call("GET", KEYS[i]) == ARGV[i] then
    redis.call("PEXPIRE", KEYS[n + i], "${fenceRetentionMillis}")
    replies[i] = redis.call("PEXPIRE", KEYS[i], lease)
  else
    replies[i] = 0
  end
end
return replies
`

/**
 * Fenced set: write a value kept in Redis only for a writer whose fencing token is not older than
 * the newest one the value has accepted, so a stale lock holder (paused past its lease, or cut off
 * by a failover) cannot overwrite the work of a later holder.
 *
 * - KEYS[1]: the data key. KEYS[2]: where the highest token accepted for it is kept (give both one
 *   hash tag on Cluster, e.g. `{account:42}` and `{account:42}:fence`).
 * - ARGV[1]: the writer's fencing token (an integer). ARGV[2]: the value.
 * - Reply `{1, token}`: written (the token was equal to or above the last accepted one, which it now
 *   is). Reply `{0, last}`: rejected, nothing written; `last` is the newer token already accepted.
 * - A token that is not a positive integer below 2^53 fails with an `ERR` reply and writes nothing.
 *   Lua's `tonumber` reads `NaN` and `Infinity`: a `NaN` token compares as neither older nor newer,
 *   so it would be written whatever the last token, and an infinite one stored as the last token
 *   would reject every later writer.
 *
 * @category scripting
 * @since 0.2.0
 */
export const fencedSet = `local token = tonumber(ARGV[1])
if token == nil or token ~= token or token < 1 or token >= 9007199254740992 or token % 1 ~= 0 then
  return redis.error_reply("ERR fencing token must be a positive integer below 2^53")
end
local last = tonumber(redis.call("GET", KEYS[2]) or "0") or 0
if token < last then
  return {0, last}
end
redis.call("SET", KEYS[1], ARGV[2])
if token > last then
  redis.call("SET", KEYS[2], ARGV[1])
end
return {1, token}
`
