/**
 * @sage/lock-node-redis: node-redis backends for @sage/lock.
 *
 * @packageDocumentation
 * @module @sage/lock-node-redis
 * @since 0.1.0
 */

/**
 * The backends over node-redis: one server, a Sentinel-managed master, a Cluster, or a client the
 * application owns.
 *
 * @since 0.1.0
 */
export * as NodeRedisBackend from "./NodeRedisBackend.ts"

/**
 * The standalone backend over Effect's `Redis` service (`NodeRedis.layer`).
 *
 * @since 0.2.0
 */
export * as EffectRedisBackend from "./EffectRedisBackend.ts"

/**
 * The standalone backend over any client that can send a command (what `@sage/lock-ioredis` is
 * built on). Import it from `@sage/lock-node-redis/CommandBackend` to leave node-redis unloaded.
 *
 * @since 0.2.1
 */
export * as CommandBackend from "./CommandBackend.ts"

/**
 * The Cluster backend over any client that keeps a slot map and can open a connection to a node
 * (what `@sage/lock-ioredis`'s Cluster backend is built on). Import it from
 * `@sage/lock-node-redis/CommandCluster` to leave node-redis unloaded.
 *
 * @since 0.2.1
 */
export * as CommandCluster from "./CommandCluster.ts"

/**
 * The Sentinel backend over any client library that can open connections to the sentinels and the
 * master (what `@sage/lock-ioredis`'s Sentinel backend is built on). Import it from
 * `@sage/lock-node-redis/CommandSentinel` to leave node-redis unloaded.
 *
 * @since 0.2.1
 */
export * as CommandSentinel from "./CommandSentinel.ts"

/**
 * `LockAdmin` and `SemaphoreAdmin` over any client that can send a command to a key's master (what
 * `@sage/lock-ioredis`'s `IoredisAdmin` is built on). Import it from
 * `@sage/lock-node-redis/CommandAdmin` to leave node-redis unloaded.
 *
 * @since 0.2.1
 */
export * as CommandAdmin from "./CommandAdmin.ts"

/**
 * Writes to Redis data that a stale lock holder cannot overwrite, checked by fencing token.
 *
 * @since 0.2.0
 */
export * as FencedWrite from "./FencedWrite.ts"

/**
 * See, list and force-release locks: what an operator needs.
 *
 * @since 0.2.0
 */
export * as LockAdmin from "./LockAdmin.ts"

/**
 * Operating semaphores and read-write locks from outside: `inspect` (limit, holders with their
 * permits and leases, waiters), `list` (by `SCAN`) and `forceRelease` of one holder.
 *
 * @since 0.2.1
 */
export * as SemaphoreAdmin from "./SemaphoreAdmin.ts"
