// The hand-written node-redis lock's scripts, which every bench's baseline uses: a compare-and-DEL
// release and a compare-and-PEXPIRE renewal of a `SET NX PX` key. One text each, so every bench's
// baseline runs the same script (same SHA1) on the server.

/** Deletes KEYS[1] only while it holds ARGV[1]; 1 when deleted, 0 otherwise. */
export const compareAndDelete = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`

/** Sets KEYS[1]'s expiry to ARGV[2] ms only while it holds ARGV[1]; 1 when renewed, 0 otherwise. */
export const compareAndExpire = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) end return 0`
