/**
 * @sage/lock-ioredis: the ioredis backend for @sage/lock.
 *
 * @packageDocumentation
 * @module @sage/lock-ioredis
 * @since 0.2.1
 */

/**
 * The backend over ioredis: connections of its own, or a client the application owns.
 *
 * @since 0.2.1
 */
export * as IoredisBackend from "./IoredisBackend.ts"

/**
 * Fenced writes over an ioredis client: data written only by the newest lock holder.
 *
 * @since 0.2.1
 */
export * as IoredisFencedWrite from "./IoredisFencedWrite.ts"

/**
 * Seeing and clearing locks and semaphores over an ioredis client, for operators.
 *
 * @since 0.2.1
 */
export * as IoredisAdmin from "./IoredisAdmin.ts"
