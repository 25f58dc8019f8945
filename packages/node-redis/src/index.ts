/**
 * @sage/lock-node-redis: node-redis backends for @sage/lock.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as NodeRedisBackend from "./NodeRedisBackend.ts"

/** @since 0.2.0 */
export * as EffectRedisBackend from "./EffectRedisBackend.ts"

/** @since 0.3.0 */
export * as FencedWrite from "./FencedWrite.ts"

/** @since 0.3.0 */
export * as LockAdmin from "./LockAdmin.ts"
