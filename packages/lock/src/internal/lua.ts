// The Lua pieces several lock scripts share (LockScripts.ts assembles the scripts): the fencing token
// of a grant, the waiter queue's clock and purge, serving the head of the line, and finding who a free
// key belongs to. Their text is part of each script's SHA1, pinned in the backend's tests: a change
// here is a protocol change.

/** See `LockScripts.fenceRetentionMillis`. */
export const fenceRetentionMillis = 7 * 24 * 60 * 60 * 1000

/** See `LockScripts.grantingWaiterPrefix`. */
export const grantingWaiterPrefix = "g."

/** See `LockScripts.ownChannelWaiterPrefix`. */
export const ownChannelWaiterPrefix = "w."

/**
 * How the id of a semaphore's waiter begins over a backend without wake-ups: it polls, so the line
 * keeps its turn for it rather than serving it (see `SemaphoreScripts`).
 */
export const pollingWaiterPrefix = "p."

// How many waiters at the head of the line a release considers: those whose process is gone (nobody
// listens for their grants) are passed over until their registrations lapse, and this bounds how
// long one release can spend on them.
const headsConsidered = 16

// Shared by the scripts that grant a lock (acquire, transfer, and through wakeHead release and
// leave): the next fencing token of KEYS[4].
//
// The floor is written as text built from `TIME`'s two replies (seconds, then microseconds padded to
// six digits), the same digits as the number it stands for: Redis formats a Lua number passed to
// `redis.call` with `%.17g`, and glibc's exact float formatting cost the server about 0.6 us of an
// uncontended cycle's 11 when pipelined and 2.6 us of its 70 one at a time. The retention goes as text for the same reason. Only the rare
// `last + 1` (a clock behind the last token) still sends a number.
export const fenceHelper = `local function issue_fence()
  local t = redis.call("TIME")
  local us = t[2]
  local floor = t[1] .. string.rep("0", 6 - #us) .. us
  local last = tonumber(redis.call("SET", KEYS[4], floor, "PX", "${fenceRetentionMillis}", "GET") or "0") or 0
  local f = tonumber(floor)
  if last < f then
    return f
  end
  redis.call("SET", KEYS[4], last + 1, "PX", "${fenceRetentionMillis}")
  return last + 1
end
`

// Shared by the scripts below that keep the waiter queue: the server's time in milliseconds, and
// dropping registrations that have lapsed (their waiter died or stopped refreshing).
//
// Each script defines these helpers where its queue work begins, after its uncontended path has
// returned: a Lua `local function` is a closure made on every run, and an uncontended acquire or
// release needs none of them (only acquire's fence). The statements that run are the same, in the
// same order, as when every script defined them at the top (acquire, which never calls `wake_head`,
// no longer defines it); only the text, and so the SHA1, differs.
export const queueHelpers = `local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function purge(now)
  local dead = redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now)
  for i = 1, #dead do
    redis.call("ZREM", KEYS[2], dead[i])
    redis.call("ZREM", KEYS[3], dead[i])
  end
end
`

// Used by release and leave when the lock is free and waiters are registered: gives the free lock's
// turn to the first waiter in line that can take it, and tells the live waiter behind that one when
// its turn lapses if unclaimed.
//
// A granting waiter gets the key itself for the claim window (ARGV[4]); a waiter with a channel of
// its own is woken there and its registration cut to the claim window. Either is served only if the
// message reaches a subscriber of its channel: a waiter whose process died (its connection closed)
// or that is not subscribed yet keeps its place and is passed over for this release (a grant's fence
// is then spent unused), so a turn never goes where nobody can take it. A woken waiter served past
// others is moved to the head of the line, since the acquire script gives a free lock to the head
// only. A waiter of an earlier version (a plain id) is woken on the shared channel, where its process
// cannot be told apart from the others, and always counts as served. The first waiter behind the one
// served that hears it gets `<id>:next:<claim ms>`: should the served one never claim (it died after
// its message), that waiter asks again as the window ends instead of at its next poll.
export const wakeHead = `${fenceHelper}${queueHelpers}local function own_channel(id)
  local prefix = string.sub(id, 1, 2)
  return prefix == "${grantingWaiterPrefix}" or prefix == "${ownChannelWaiterPrefix}"
end
local function notify(id, message)
  if own_channel(id) then
    return redis.call(ARGV[3], ARGV[2] .. ":" .. id, message)
  end
  redis.call(ARGV[3], ARGV[2], message)
  return 1
end
local function wake_head(now)
  purge(now)
  local line = redis.call("ZRANGE", KEYS[2], 0, ${headsConsidered - 1}, "WITHSCORES")
  for i = 1, #line, 2 do
    local head = line[i]
    local served
    if string.sub(head, 1, 2) == "${grantingWaiterPrefix}" then
      local token = head .. ":" .. string.format("%d", issue_fence())
      served = notify(head, token .. ":" .. ARGV[4]) > 0
      if served then
        redis.call("SET", KEYS[1], token, "PX", ARGV[4])
        redis.call("ZREM", KEYS[2], head)
        redis.call("ZREM", KEYS[3], head)
      end
    else
      served = notify(head, head) > 0
      if served then
        redis.call("ZADD", KEYS[3], "LT", now + tonumber(ARGV[4]), head)
        if i > 1 then
          redis.call("ZADD", KEYS[2], "XX", tonumber(line[2]) - 1, head)
        end
      end
    end
    if served then
      for j = i + 2, #line, 2 do
        if notify(line[j], line[j] .. ":next:" .. ARGV[4]) > 0 then
          return
        end
      end
      return
    end
  end
end
wake_head(now_ms())
`

// Used by acquire on a free key with waiters registered (no release served anyone: the holder's lease
// ran out, or the key was deleted): whether the key is the caller's, serving the first live waiter
// ahead of it instead when there is one (see `LockScripts.acquire`, ARGV[5..7]). Defined after the
// uncontended path, like the queue helpers, and uses the caller's `waiter` id.
export const firstInLine = `local function first_in_line(now)
  local line = redis.call("ZRANGE", KEYS[2], 0, ${headsConsidered - 1})
  if ARGV[5] == nil then
    return line[1] == nil or line[1] == waiter
  end
  local claim_ends = now + tonumber(ARGV[7])
  local served = {}
  for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", claim_ends)) do
    served[id] = true
  end
  for i = 1, #line do
    local id = line[i]
    if id == waiter then
      return true
    end
    local prefix = string.sub(id, 1, 2)
    if prefix ~= "${grantingWaiterPrefix}" and prefix ~= "${ownChannelWaiterPrefix}" then
      return false
    end
    local channel = ARGV[5] .. ":" .. id
    if served[id] then
      if redis.call(ARGV[6], channel, id .. ":next:" .. ARGV[7]) > 0 then
        return false
      end
    elseif redis.call(ARGV[6], channel, id) > 0 then
      redis.call("ZADD", KEYS[3], "LT", claim_ends, id)
      return false
    end
  end
  return #line < ${headsConsidered}
end
`
