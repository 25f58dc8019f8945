/**
 * The lock protocol: three Lua scripts, each atomic on one key, shared by every backend.
 *
 * They are plain `EVAL` scripts without a `#!lua` shebang on purpose: under `maxmemory` with
 * `noeviction`, Redis and Valkey check memory per command inside such scripts, so `GET`, `PEXPIRE`
 * and `DEL` keep working and a held lock can still be renewed and released, while the `SET` of a new
 * acquisition fails with `OOM` (a shebang script would need `flags=allow-oom` to renew at all).
 *
 * Each script touches exactly one key, declared in `KEYS`, so it is Cluster-safe and never sees
 * `CROSSSLOT` or `TRYAGAIN` during slot migration.
 *
 * @since 0.1.0
 */

/**
 * Acquire, idempotently.
 *
 * - KEYS[1]: the lock key. ARGV[1]: the caller's token. ARGV[2]: the lease in milliseconds.
 * - Reply `{1}`: the key was free and now holds the token with the lease; or it already held the
 *   token (an earlier attempt whose reply was lost had succeeded) and its lease was re-armed.
 * - Reply `{0, pttl}`: another token holds it; `pttl` is its remaining lease in milliseconds
 *   (-1 when the key has no expiry, which only happens when something else wrote it).
 * - A non-string key fails with `WRONGTYPE` from `GET`: the namespace is shared with other data.
 *
 * @category scripting
 * @since 0.1.0
 */
export const acquire = `local current = redis.call("GET", KEYS[1])
if current == false then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  return {1}
end
if current == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return {1}
end
return {0, redis.call("PTTL", KEYS[1])}
`

/**
 * Renew: extend the lease only while the key still holds the caller's token.
 *
 * - KEYS[1]: the lock key. ARGV[1]: the token. ARGV[2]: the new lease in milliseconds.
 * - Reply 1: renewed. Reply 0: the key is gone or holds another token (ownership lost).
 *
 * @category scripting
 * @since 0.1.0
 */
export const renew = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
`

/**
 * Release: compare-and-delete, so a caller never deletes a lock that has passed to someone else.
 *
 * - KEYS[1]: the lock key. ARGV[1]: the token.
 * - Reply 1: deleted. Reply 0: the key was gone or held another token.
 *
 * @category scripting
 * @since 0.1.0
 */
export const release = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
`
