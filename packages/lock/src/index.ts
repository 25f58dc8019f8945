/**
 * @sage/lock: distributed locks and semaphores for Effect programs on Redis and Valkey.
 *
 * @packageDocumentation
 * @module @sage/lock
 * @since 0.1.0
 */

/**
 * Key types to the text of a lock's Redis key: `string`, `integer`, `bytes`, `schema(S)`, `make`.
 *
 * @since 0.1.0
 */
export * as KeyCodec from "./KeyCodec.ts"

/**
 * The lease a lock call holds: key, fencing token, remaining validity, `ensure`, `check`, `lost`.
 *
 * @since 0.2.0
 */
export * as Lease from "./Lease.ts"

/**
 * The `Lock` service: `withLock`, `tryWithLock`, `acquire`, its options and its layers.
 *
 * @since 0.1.0
 */
export * as Lock from "./Lock.ts"

/**
 * The port a deployment implements (acquire, renew, release, check, wake-ups) and its service key.
 *
 * @since 0.1.0
 */
export * as LockBackend from "./LockBackend.ts"

/**
 * The errors a lock call adds: `TimedOut`, `LockLost`, `InvalidArgument`, `LockRedisError`.
 *
 * @since 0.1.0
 */
export * as LockError from "./LockError.ts"

/**
 * The metrics every lock client records, with OpenTelemetry names.
 *
 * @since 0.1.0
 */
export * as LockMetrics from "./LockMetrics.ts"

/**
 * The Lua protocol every backend runs, and the format of the keys and channels it uses.
 *
 * @since 0.1.0
 */
export * as LockScripts from "./LockScripts.ts"

/**
 * An in-process backend with leases on Effect's `Clock`: tests and single-process programs.
 *
 * @since 0.1.0
 */
export * as MemoryBackend from "./MemoryBackend.ts"

/**
 * The `Semaphore` service: `withPermits`, `tryWithPermits`, `acquire`: at most `limit` permits of a
 * key held at once, across processes.
 *
 * @since 0.2.1
 */
export * as Semaphore from "./Semaphore.ts"

/**
 * The semaphore's Lua scripts and key layout (holders scored with the server's clock, a fair line).
 *
 * @since 0.2.1
 */
export * as SemaphoreScripts from "./SemaphoreScripts.ts"

/**
 * The metric every semaphore client records: the permits its bodies hold now.
 *
 * @since 0.2.1
 */
export * as SemaphoreMetrics from "./SemaphoreMetrics.ts"

/**
 * The `ReadWriteLock` service: `withReadLock`, `withWriteLock` and their `try` and scoped forms:
 * many readers or one writer, first come, first served.
 *
 * @since 0.2.1
 */
export * as ReadWriteLock from "./ReadWriteLock.ts"

/**
 * The `Election` service: `campaign`, `observe`, `leader` and `run`: one leader at a time, a term
 * per leadership, and a stream of who leads.
 *
 * @since 0.2.1
 */
export * as Election from "./Election.ts"

/**
 * The metrics every election client records: terms won, how long each lead lasted, and how late
 * observers see a new term.
 *
 * @since 0.2.1
 */
export * as ElectionMetrics from "./ElectionMetrics.ts"

/**
 * `Leadership`: what a leader holds while it leads an election (`Election.campaign`).
 *
 * @since 0.2.1
 */
export * as Leadership from "./Leadership.ts"

/**
 * The election protocol: the Lua scripts that publish and read who leads an election.
 *
 * @since 0.2.1
 */
export * as ElectionScripts from "./ElectionScripts.ts"

/**
 * The Promise API: locks, semaphores and elections for code outside Effect, with `AbortSignal`s
 * and `await using` handles.
 *
 * @since 0.2.1
 */
export * as PromiseClient from "./PromiseClient.ts"
