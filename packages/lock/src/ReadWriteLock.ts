/**
 * Distributed read-write locks for Effect programs, on Redis and Valkey: many readers of a key at
 * once, or one writer alone.
 *
 * A read-write lock is a semaphore whose readers each take one permit and whose writer takes all of
 * them, so it has the semaphore's guarantees: leases on the server's clock, renewal while the body
 * runs, `LockLost` when they cannot be confirmed, a fencing token per grant (one sequence for the
 * readers and writers of a key, so a write's token is above those of every read granted before it),
 * and one line, first come, first served, across processes. A writer waits for the readers ahead of
 * it, and readers who come after a waiting writer wait for it: a stream of readers never starves
 * a writer.
 *
 * @since 0.2.1
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Handle, Lease } from "./Lease.ts"
import type { LockBackend } from "./LockBackend.ts"
import type { InvalidArgument, LockError, LockRedisError } from "./LockError.ts"
import * as Semaphore from "./Semaphore.ts"
import { maxLimit } from "./internal/semaphoreCalls.ts"

/**
 * Options of a read-write lock client: those of a semaphore client. The namespace defaults to
 * `"rwlock"`.
 *
 * @category options
 * @since 0.2.1
 */
export type ReadWriteLockOptions<K = string> = Semaphore.SemaphoreOptions<K>

/**
 * Per-call options of `withReadLock` and `withWriteLock`.
 *
 * @category options
 * @since 0.2.1
 */
export interface WithReadWriteLockOptions {
  /** How long to wait: finite and positive. When it runs out the call fails with `TimedOut`. */
  readonly waitTimeout: Duration.Input
}

/**
 * Per-call options of `acquireRead` and `acquireWrite`.
 *
 * @category options
 * @since 0.2.1
 */
export interface AcquireReadWriteLockOptions extends WithReadWriteLockOptions {
  /** See `Lock.AcquireOptions.interruptOnLoss`. Defaults to `true`. */
  readonly interruptOnLoss?: boolean | undefined
}

type Body<R> = <A, E, R2>(body: Effect.Effect<A, E, R2>) => Effect.Effect<A, E | LockError, Exclude<R2, Lease> | R>
type TryBody<R> = <A, E, R2>(
  body: Effect.Effect<A, E, R2>
) => Effect.Effect<Option.Option<A>, E | LockError, Exclude<R2, Lease> | R>

/**
 * A read-write lock client for keys of type `K`.
 *
 * @category models
 * @since 0.2.1
 */
export interface ReadWriteLockClient<K> {
  /** The validated namespace. */
  readonly namespace: string
  /** The validated lease. */
  readonly leaseDuration: Duration.Duration
  /** Runs the body as one of the key's readers; fails as `Lock.withLock` does. */
  readonly withReadLock: (key: K, options: WithReadWriteLockOptions) => Body<never>
  /** Runs the body as the key's only writer; fails as `Lock.withLock` does. */
  readonly withWriteLock: (key: K, options: WithReadWriteLockOptions) => Body<never>
  /** Runs the body as a reader only if that is possible now (no writer holds or waits). */
  readonly tryWithReadLock: (key: K) => TryBody<never>
  /** Runs the body as the writer only if the key is free now (no reader or writer holds or waits). */
  readonly tryWithWriteLock: (key: K) => TryBody<never>
  /** Holds a read lock until the scope closes. */
  readonly acquireRead: (key: K, options: AcquireReadWriteLockOptions) => Effect.Effect<Handle, LockError, Scope.Scope>
  /** Holds the write lock until the scope closes. */
  readonly acquireWrite: (key: K, options: AcquireReadWriteLockOptions) => Effect.Effect<Handle, LockError, Scope.Scope>
}

/**
 * The read-write lock service for string keys, as provided by `ReadWriteLock.layer`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ReadWriteLock } from "@sage/lock"
 *
 * const readConfig = Effect.gen(function*() {
 *   const locks = yield* ReadWriteLock.ReadWriteLock
 *   return yield* locks.withReadLock("config", { waitTimeout: "5 seconds" })(Effect.succeed("config v7"))
 * })
 * ```
 *
 * @category services
 * @since 0.2.1
 */
export class ReadWriteLock extends Context.Service<ReadWriteLock, ReadWriteLockClient<string>>()(
  "@sage/lock/ReadWriteLock"
) {}

/** A reader's share and a writer's, of a semaphore as large as the server counts. */
const reader = { limit: maxLimit, permits: 1 }
const writer = { limit: maxLimit, permits: maxLimit }

/**
 * Builds a read-write lock client for keys of type `K` over the `LockBackend` in context.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ReadWriteLock } from "@sage/lock"
 *
 * const program = Effect.gen(function*() {
 *   const catalog = yield* ReadWriteLock.make({ namespace: "catalog" })
 *   yield* catalog.withWriteLock("prices", { waitTimeout: "10 seconds" })(Effect.log("repricing alone"))
 * })
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const make = <K = string>(
  options: ReadWriteLockOptions<K> = {}
): Effect.Effect<ReadWriteLockClient<K>, InvalidArgument | LockRedisError, LockBackend | Scope.Scope> =>
  Effect.map(
    Semaphore.make<K>({ ...options, namespace: options.namespace ?? "rwlock" }),
    (semaphores): ReadWriteLockClient<K> => ({
      namespace: semaphores.namespace,
      leaseDuration: semaphores.leaseDuration,
      withReadLock: (key, callOptions) =>
        semaphores.withPermits(key, { ...reader, waitTimeout: callOptions?.waitTimeout }),
      withWriteLock: (key, callOptions) =>
        semaphores.withPermits(key, { ...writer, waitTimeout: callOptions?.waitTimeout }),
      tryWithReadLock: (key) => semaphores.tryWithPermits(key, reader),
      tryWithWriteLock: (key) => semaphores.tryWithPermits(key, writer),
      acquireRead: (key, callOptions) =>
        semaphores.acquire(key, {
          ...reader,
          waitTimeout: callOptions?.waitTimeout,
          interruptOnLoss: callOptions?.interruptOnLoss
        }),
      acquireWrite: (key, callOptions) =>
        semaphores.acquire(key, {
          ...writer,
          waitTimeout: callOptions?.waitTimeout,
          interruptOnLoss: callOptions?.interruptOnLoss
        })
    })
  )

/**
 * The `ReadWriteLock` service for string keys, over the `LockBackend` in context.
 *
 * @category layers
 * @since 0.2.1
 */
export const layer = (
  options?: ReadWriteLockOptions<string>
): Layer.Layer<ReadWriteLock, InvalidArgument | LockRedisError, LockBackend> =>
  Layer.effect(ReadWriteLock, make(options))

/**
 * `withReadLock` of the `ReadWriteLock` service.
 *
 * @category accessors
 * @since 0.2.1
 */
export const withReadLock =
  (key: string, options: WithReadWriteLockOptions) =>
  <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E | LockError, Exclude<R, Lease> | ReadWriteLock> =>
    ReadWriteLock.use((locks) => locks.withReadLock(key, options)(body))

/**
 * `withWriteLock` of the `ReadWriteLock` service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ReadWriteLock } from "@sage/lock"
 *
 * declare const migrate: Effect.Effect<void>
 * const program = migrate.pipe(ReadWriteLock.withWriteLock("schema", { waitTimeout: "1 minute" }))
 * ```
 *
 * @category accessors
 * @since 0.2.1
 */
export const withWriteLock =
  (key: string, options: WithReadWriteLockOptions) =>
  <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E | LockError, Exclude<R, Lease> | ReadWriteLock> =>
    ReadWriteLock.use((locks) => locks.withWriteLock(key, options)(body))
