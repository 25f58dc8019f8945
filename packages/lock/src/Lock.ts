/**
 * Distributed locks for Effect programs, on Redis and Valkey.
 *
 * `withLock(key, { waitTimeout })(body)` acquires the lock (waiting in the server's waiter queue until
 * a release wakes it, with jittered polling as a safety net), runs the body while the client's
 * renewal scheduler renews the lease, and releases it with a compare-and-delete whatever the body's
 * outcome. `tryWithLock(key)(body)` does not wait for a busy lock. Both give the body its `Lease`
 * (key, fencing token, remaining validity, a server check). `acquire(key, { waitTimeout })` holds a
 * lock for the lifetime of a `Scope` instead of one body.
 *
 * **Guarantees and limits**
 * - Exclusion holds while the lease is valid on the server. The lock stops relying on it as soon as
 *   renewal cannot confirm it: the body is interrupted and the call fails with `LockLost`.
 * - Interruption is cooperative: work already done is not undone; uninterruptible work delays it.
 * - A process paused longer than its lease, a failover that loses the key, or eviction can let two
 *   bodies overlap. Every acquisition gets a fencing token (`Lease.fencingToken`) for the resource to
 *   check, which is what protects correctness-critical writes (see `docs/fencing.md`).
 * - The body is never retried and locks are not reentrant. Waiters in different processes are served
 *   from a queue at the server that prevents starvation (not a strict order); fibers of one client
 *   queue per key in arrival order (one server contender each).
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as KeyCodec from "./KeyCodec.ts"
import type { Handle, Lease } from "./Lease.ts"
import { LockBackend } from "./LockBackend.ts"
import type { InvalidArgument, LockError, LockRedisError } from "./LockError.ts"
import * as Calls from "./internal/calls.ts"
import { acquireScoped } from "./internal/scoped.ts"
import { checkKeyCodec, checkOptions, invalid, makeSettings, tryBudgetMillis } from "./internal/settings.ts"

/**
 * Options of a lock client. Validated once, when the client or layer is built.
 *
 * @category options
 * @since 0.1.0
 */
export interface LockOptions<K = string> {
  /**
   * How long a lock stays valid without renewal. Defaults to 30 seconds; at least 30 milliseconds,
   * at most 2^53 - 1 milliseconds.
   * Choose it comfortably longer than network latency plus the longest process pause you expect:
   * a crashed holder blocks others for up to one lease.
   */
  readonly leaseDuration?: Duration.Input | undefined
  /** Prefix of every lock key; locks in different namespaces never contend. Defaults to `"lock"`. */
  readonly namespace?: string | undefined
  /** How keys become Redis key text. Defaults to `KeyCodec.string`. */
  readonly keyCodec?: KeyCodec.KeyCodec<K> | undefined
  /**
   * On replicated deployments (Sentinel, Cluster), wait for replicas to acknowledge every acquisition
   * and renewal. Defaults to `true`. Standalone deployments ignore it.
   */
  readonly replicaAcknowledgement?: boolean | undefined
}

/**
 * Per-call options of `withLock`.
 *
 * @category options
 * @since 0.1.0
 */
export interface WithLockOptions {
  /**
   * How long to try to acquire: finite and positive. It bounds server replies and retry delays, not
   * the body. When it runs out the call fails with `TimedOut` and the body does not start; releasing
   * an attempt that may have succeeded can add up to one second.
   */
  readonly waitTimeout: Duration.Input
}

/**
 * Per-call options of `acquire`.
 *
 * @category options
 * @since 0.2.0
 */
export interface AcquireOptions extends WithLockOptions {
  /**
   * When the lease is lost while the scope is open and nothing is waiting on `lease.lost`, interrupt
   * the fiber that called `acquire` (if it is still running). Defaults to `true`. The loss is always
   * visible on the lease (`lost`, `ensure`, `remaining`) and logged as a warning.
   */
  readonly interruptOnLoss?: boolean | undefined
}

/**
 * A lock client for keys of type `K`.
 *
 * @category models
 * @since 0.1.0
 */
export interface LockClient<K> {
  /** The validated namespace. */
  readonly namespace: string
  /** The validated lease. */
  readonly leaseDuration: Duration.Duration
  /**
   * Waits for the lock, runs the body while renewing the lease, releases the lock, and returns the
   * body's result. Fails with `TimedOut` (body not run), `LockLost` (body interrupted, or found
   * unprotected at release), `InvalidArgument` or a non-retryable `LockRedisError`.
   */
  readonly withLock: (
    key: K,
    options: WithLockOptions
  ) => <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | LockError, Exclude<R, Lease>>
  /**
   * Runs the body only if the lock is free right now: `Option.none()` when busy (body not run),
   * `Option.some(result)` after the body ran and the lock was released. Temporary failures are
   * retried for about one second (bounded by the usable lease), then `TimedOut`. While another
   * fiber of the same client holds or waits for the key, the answer is `Option.none()` at once, or
   * `TimedOut` (`reason: "unavailable"`, `attempts: 0`) when that fiber's attempts are failing
   * because the server does not answer: an outage is never reported as busy.
   */
  readonly tryWithLock: (
    key: K
  ) => <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<Option.Option<A>, E | LockError, Exclude<R, Lease>>
  /**
   * Waits for the lock as `withLock` does and holds it, renewed, until the scope closes; closing the
   * scope releases it (bounded to one second, uninterruptible). Fails with `TimedOut`,
   * `InvalidArgument` or a non-retryable `LockRedisError` when the lock is not acquired, or `LockLost`
   * when it is lost before the lease is handed over.
   *
   * **Details**
   * A loss while the scope is open is never silent: the lease's `lost` fails with it (race your work
   * against it), `ensure` fails and `remaining` is zero, and a warning is logged. If nothing is
   * waiting on `lost` when the loss is found, the fiber that called `acquire` is interrupted
   * (unless `interruptOnLoss: false`).
   */
  readonly acquire: (key: K, options: AcquireOptions) => Effect.Effect<Handle, LockError, Scope.Scope>
}

/**
 * The lock service for string keys, as provided by `Lock.layer`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * const program = Effect.gen(function*() {
 *   const lock = yield* Lock.Lock
 *   return yield* lock.withLock("report", { waitTimeout: "5 seconds" })(Effect.succeed(1))
 * })
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export class Lock extends Context.Service<Lock, LockClient<string>>()("@sage/lock/Lock") {}

/**
 * Builds a lock client for keys of type `K` over the `LockBackend` in context.
 *
 * **Details**
 * Fails with `InvalidArgument` when `leaseDuration` is unparsable, not finite, not positive, under
 * 30 ms or over 2^53 - 1 ms, or when `namespace` is empty or contains `{`/`}`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { KeyCodec, Lock } from "@sage/lock"
 *
 * const program = Effect.gen(function*() {
 *   const jobs = yield* Lock.make({ namespace: "jobs", keyCodec: KeyCodec.integer, leaseDuration: "10 seconds" })
 *   yield* jobs.withLock(42, { waitTimeout: "1 second" })(Effect.log("job 42 is mine"))
 * })
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: <K = string>(
  options?: LockOptions<K>
) => Effect.Effect<LockClient<K>, InvalidArgument | LockRedisError, LockBackend | Scope.Scope> = Effect.fnUntraced(
  function* <K = string>(options: LockOptions<K> = {}) {
    yield* checkOptions(options)
    const settings = yield* makeSettings(options)
    const codec = yield* checkKeyCodec(options.keyCodec, KeyCodec.string as unknown as KeyCodec.KeyCodec<K>)
    // Only once the options are known to be good: a backend may still be connecting.
    const service = yield* LockBackend
    const backend = service.connected === undefined ? service : yield* service.connected
    const shared = yield* Calls.makeShared(backend, settings)
    const tryBudget = Math.min(tryBudgetMillis, settings.usableLeaseMillis)
    const client: LockClient<K> = {
      acquire: (key, callOptions) => {
        const interruptOnLoss: unknown = callOptions?.interruptOnLoss
        return interruptOnLoss === undefined || typeof interruptOnLoss === "boolean"
          ? acquireScoped(client.withLock(key, callOptions), interruptOnLoss !== false, shared.warnings)
          : Effect.fail(invalid("interruptOnLoss", interruptOnLoss, "must be a boolean"))
      },
      namespace: settings.namespace,
      leaseDuration: Duration.millis(settings.leaseMillis),
      withLock: (key, callOptions) => (body) => Calls.withLock(shared, codec, key, callOptions?.waitTimeout, body),
      tryWithLock: (key) => (body) => Calls.tryWithLock(shared, codec, tryBudget, key, body)
    }
    return client
  }
)

/**
 * The `Lock` service for string keys, over the `LockBackend` in context.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const LockLive = Lock.layer({ leaseDuration: "10 seconds", namespace: "account-updates" }).pipe(
 *   Layer.provide(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379" }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options?: LockOptions<string>
): Layer.Layer<Lock, InvalidArgument | LockRedisError, LockBackend> => Layer.effect(Lock, make(options))

/**
 * The configurable options of `layerConfig` (everything but the key codec).
 *
 * @category options
 * @since 0.1.0
 */
export type LockConfigOptions = Omit<LockOptions<string>, "keyCodec">

/**
 * The `Lock` service with its options read from `Config`.
 *
 * @example
 * ```ts
 * import { Config } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * const LockFromEnv = Lock.layerConfig({
 *   namespace: Config.String("LOCK_NAMESPACE").pipe(Config.withDefault("lock")),
 *   leaseDuration: Config.Duration("LOCK_LEASE").pipe(Config.withDefault("30 seconds"))
 * })
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerConfig = (
  options: Config.Wrap<LockConfigOptions>
): Layer.Layer<Lock, InvalidArgument | LockRedisError | Config.ConfigError, LockBackend> =>
  Layer.effect(
    Lock,
    Effect.flatMap(Config.unwrap(options), (resolved) => make<string>(resolved))
  )

/**
 * Runs `body` under the lock for `key`, using the `Lock` service in context.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * declare const updateAccount: Effect.Effect<void>
 * const program = updateAccount.pipe(Lock.withLock("account:42", { waitTimeout: "2 seconds" }))
 * ```
 *
 * @category accessors
 * @since 0.1.0
 */
export const withLock =
  (key: string, options: WithLockOptions) =>
  <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E | LockError, Exclude<R, Lease> | Lock> =>
    Lock.use((lock) => lock.withLock(key, options)(body))

/**
 * Runs `body` only if the lock for `key` is free now, using the `Lock` service in context.
 *
 * @example
 * ```ts
 * import { Effect, Option } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * declare const runCron: Effect.Effect<number>
 * const program = runCron.pipe(
 *   Lock.tryWithLock("cron:hourly"),
 *   Effect.map(Option.match({ onNone: () => "another process ran it", onSome: (n) => `ran: ${n}` }))
 * )
 * ```
 *
 * @category accessors
 * @since 0.1.0
 */
export const tryWithLock =
  (key: string) =>
  <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<Option.Option<A>, E | LockError, Exclude<R, Lease> | Lock> =>
    Lock.use((lock) => lock.tryWithLock(key)(body))

/**
 * Holds the lock for `key` until the scope closes, using the `Lock` service in context; returns the
 * lease. See `LockClient.acquire`.
 *
 * **Details**
 * Closing the scope releases the lock (bounded to one second). A loss while the scope is open shows
 * on the lease (`lost` fails with `LockLost`, `ensure` fails, `remaining` is zero) and is logged; if
 * nothing waits on `lost` at that moment, the fiber that called `acquire` is interrupted (unless
 * `interruptOnLoss: false`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * declare const serveAsLeader: (fencingToken: number) => Effect.Effect<never>
 * const leader = Effect.scoped(
 *   Effect.gen(function* () {
 *     const lease = yield* Lock.acquire("leader", { waitTimeout: "30 seconds" })
 *     // Stops with LockLost as soon as leadership is lost; the scope's close releases the lock.
 *     return yield* Effect.raceFirst(serveAsLeader(lease.fencingToken), lease.lost)
 *   })
 * )
 * ```
 *
 * @category accessors
 * @since 0.2.0
 */
export const acquire = (key: string, options: AcquireOptions): Effect.Effect<Handle, LockError, Scope.Scope | Lock> =>
  Lock.use((lock) => lock.acquire(key, options))
