/**
 * @sage/lock: distributed locks for Effect programs on Redis and Valkey.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as KeyCodec from "./KeyCodec.ts"

/** @since 0.2.0 */
export * as Lease from "./Lease.ts"

/** @since 0.1.0 */
export * as Lock from "./Lock.ts"

/** @since 0.1.0 */
export * as LockBackend from "./LockBackend.ts"

/** @since 0.1.0 */
export * as LockError from "./LockError.ts"

/** @since 0.1.0 */
export * as LockMetrics from "./LockMetrics.ts"

/** @since 0.1.0 */
export * as LockScripts from "./LockScripts.ts"

/** @since 0.1.0 */
export * as MemoryBackend from "./MemoryBackend.ts"
