// The Lua pieces the semaphore's scripts share (SemaphoreScripts.ts assembles them): the server's
// clock and the fencing token, the holders' bookkeeping, and serving the line. Their text is part of
// each script's SHA1, pinned in the backend's tests: a change here is a protocol change.
import * as Lua from "./lua.ts"

const { grantingWaiterPrefix, ownChannelWaiterPrefix } = Lua

// The server's time, which every semaphore script reads first: `t` as `TIME` gives it, `now` in
// milliseconds.
export const clock = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// The next fencing token of KEYS[4], from `t`, as the lock issues one (`max(last + 1, server time in
// microseconds)`, written as text: see lua.ts), left in `f`: inlined by the uncontended acquire, and
// the body of `issue_fence` for the scripts that may issue several (a release serving the line).
export const fenceStatements = `local floor = t[1] .. string.rep("0", 6 - #t[2]) .. t[2]
local last = tonumber(redis.call("SET", KEYS[4], floor, "PX", "${Lua.fenceRetentionMillis}", "GET") or "0") or 0
local f = tonumber(floor)
if last >= f then
  f = last + 1
  redis.call("SET", KEYS[4], f, "PX", "${Lua.fenceRetentionMillis}")
end
`

export const fence = `local function issue_fence()
${fenceStatements}return f
end
`

// What the scripts that change holders define once past their fast path: the holders' bookkeeping
// reset when their sorted set is gone (expired with its last lease, or deleted by hand) while the
// hash remains, and the helpers that add and drop holders. A Lua `local function` is a closure made
// on every run, so the uncontended path, which needs none of them, returns before they are defined.
//
// The hash keeps the limit alone in that case, and only while waiters are registered: their asks were
// checked against it.
export const holderHelpers = `if redis.call("EXISTS", KEYS[1]) == 0 and redis.call("EXISTS", KEYS[5]) == 1 then
  local kept = redis.call("HGET", KEYS[5], "=limit")
  redis.call("DEL", KEYS[5])
  local ttl = redis.call("PTTL", KEYS[2])
  if kept and ttl > 0 then
    redis.call("HSET", KEYS[5], "=limit", kept)
    redis.call("PEXPIRE", KEYS[5], ttl)
  end
end
local function used()
  return tonumber(redis.call("HGET", KEYS[5], "=used") or "0") or 0
end
local function keep(ms)
  for _, k in ipairs({KEYS[1], KEYS[5]}) do
    if redis.call("PTTL", k) < ms then
      redis.call("PEXPIRE", k, ms)
    end
  end
end
local function hold(member, count, fence, ms)
  redis.call("ZADD", KEYS[1], now + ms, member)
  redis.call("HSET", KEYS[5], member, string.format("%d:%d", count, fence))
  redis.call("HINCRBY", KEYS[5], "=used", count)
  keep(ms)
end
local function drop(member)
  local held = redis.call("HGET", KEYS[5], member)
  redis.call("ZREM", KEYS[1], member)
  if held then
    redis.call("HDEL", KEYS[5], member)
    redis.call("HINCRBY", KEYS[5], "=used", -tonumber(string.match(held, "^%d+")))
  end
  local waiter = string.match(member, "^(.*):%d+$")
  if waiter and redis.call("HGET", KEYS[5], "@" .. waiter) == member then
    redis.call("HDEL", KEYS[5], "@" .. waiter)
  end
end
local function tidy()
  if redis.call("EXISTS", KEYS[1]) == 0 and redis.call("EXISTS", KEYS[2]) == 0 then
    redis.call("DEL", KEYS[5])
  end
end
local function expire_holders()
  local ended = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now)
  for i = 1, #ended do
    drop(ended[i])
  end
end
`

// Dropping lapsed registrations, and serving the line from its head (see the module's header).
// `serve` stops at `caller` when its request fits: the caller is then first in line and takes its
// permits itself (answers true).
export const lineHelpers = `local function purge()
  local lapsed = redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now)
  for i = 1, #lapsed do
    redis.call("ZREM", KEYS[2], lapsed[i])
    redis.call("ZREM", KEYS[3], lapsed[i])
    redis.call("HDEL", KEYS[6], lapsed[i])
  end
end
local function serve(channel, publish, claim, caller)
  purge()
  local free = (tonumber(redis.call("HGET", KEYS[5], "=limit") or "0") or 0) - used()
  if free <= 0 then
    return false
  end
  local line = redis.call("ZRANGE", KEYS[2], 0, 15)
  for i = 1, #line do
    local id = line[i]
    local ask = tonumber(redis.call("HGET", KEYS[6], id) or "1") or 1
    if ask > free then
      return false
    end
    if id == caller then
      return true
    end
    local prefix = string.sub(id, 1, 2)
    if prefix ~= "${grantingWaiterPrefix}" and prefix ~= "${ownChannelWaiterPrefix}" then
      return false
    end
    local fence = issue_fence()
    local member = id .. ":" .. string.format("%d", fence)
    local message = id
    if string.sub(id, 1, 2) == "${grantingWaiterPrefix}" then
      message = member .. ":" .. claim
    end
    if redis.call(publish, channel .. ":" .. id, message) > 0 then
      hold(member, ask, fence, tonumber(claim))
      redis.call("HSET", KEYS[5], "@" .. id, member)
      redis.call("ZREM", KEYS[2], id)
      redis.call("ZREM", KEYS[3], id)
      redis.call("HDEL", KEYS[6], id)
      free = free - ask
      if free <= 0 then
        return false
      end
    end
  end
  return false
end
`
