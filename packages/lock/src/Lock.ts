/**
 * Distributed locks for Effect programs, on Redis and Valkey.
 *
 * `withLock(key, { waitTimeout })(body)` acquires the lock (waiting with capped, jittered backoff),
 * runs the body while a scoped fiber renews the lease, and releases it with a compare-and-delete
 * whatever the body's outcome. `tryWithLock(key)(body)` does not wait for a busy lock.
 *
 * **Guarantees and limits**
 * - Exclusion holds while the lease is valid on the server. The lock stops relying on it as soon as
 *   renewal cannot confirm it: the body is interrupted and the call fails with `LockLost`.
 * - Interruption is cooperative: work already done is not undone; uninterruptible work delays it.
 * - There is no fencing token yet: a process paused longer than its lease, a failover that loses the
 *   key, or eviction can let two bodies overlap. Protect correctness-critical writes at the resource.
 * - The body is never retried and locks are not reentrant. Waiters in different processes are not
 *   served in order; fibers of one client queue per key in arrival order (one server contender each).
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as KeyCodec from "./KeyCodec.ts"
import { LockBackend } from "./LockBackend.ts"
import type { Backend, LeaseRequest } from "./LockBackend.ts"
import { type InvalidArgument, type LockError, LockLost, TimedOut } from "./LockError.ts"
import { acquire, type HeldLease } from "./internal/acquire.ts"
import { lockKey } from "./internal/keys.ts"
import * as LocalQueue from "./internal/localQueue.ts"
import * as Metrics from "./internal/metrics.ts"
import { release } from "./internal/release.ts"
import { renewalLoop } from "./internal/renewal.ts"
import { nowMillis } from "./internal/time.ts"
import { invalid, makeSettings, positiveMillis, type Settings, tryBudgetMillis } from "./internal/settings.ts"

/**
 * Options of a lock client. Validated once, when the client or layer is built.
 *
 * @category options
 * @since 0.1.0
 */
export interface LockOptions<K = string> {
  /**
   * How long a lock stays valid without renewal. Defaults to 30 seconds; at least 30 milliseconds.
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
   * unprotected at release), `InvalidArgument` or a non-retryable `RedisError`.
   */
  readonly withLock: (
    key: K,
    options: WithLockOptions
  ) => <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | LockError, R>
  /**
   * Runs the body only if the lock is free right now: `Option.none()` when busy (body not run),
   * `Option.some(result)` after the body ran and the lock was released. Temporary failures are
   * retried for about one second (bounded by the usable lease), then `TimedOut`.
   */
  readonly tryWithLock: (
    key: K
  ) => <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<Option.Option<A>, E | LockError, R>
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

const newToken = (): string => globalThis.crypto.randomUUID()

const encodeKey = <K>(codec: KeyCodec.KeyCodec<K>, namespace: string, key: K): Effect.Effect<string, InvalidArgument> =>
  Effect.suspend(() => {
    let encoded: Result.Result<string, string>
    try {
      encoded = codec.encode(key)
    } catch (cause) {
      encoded = Result.fail(`the ${codec.name} codec threw: ${String(cause)}`)
    }
    return Result.isSuccess(encoded)
      ? Effect.succeed(lockKey(namespace, encoded.success))
      : Effect.fail(invalid("key", key, encoded.failure))
  })

/**
 * Acquire (inside the caller's interruptibility), run the body raced against renewal, then release
 * uninterruptibly whatever happened. Returns `None` only when `try` found the lock busy.
 */
const runLocked = <A, E, R>(
  backend: Backend,
  settings: Settings,
  key: string,
  budgetMillis: number,
  mode: "wait" | "try",
  body: Effect.Effect<A, E, R>
): Effect.Effect<Option.Option<A>, E | LockError, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function* () {
      const token = newToken()
      const outcome = yield* restore(
        Metrics.trackAcquire(settings.namespace, acquire({ backend, settings, key, token, budgetMillis, mode }))
      )
      if (outcome._tag === "Busy") return Option.none<A>()
      const lease: HeldLease = outcome.lease
      const exit = yield* Effect.exit(restore(Effect.raceFirst(body, renewalLoop(backend, settings, lease))))
      yield* Metrics.trackRun(settings.namespace, exit)
      const request = (timeoutMillis: number): LeaseRequest => ({
        key,
        token,
        leaseMillis: settings.leaseMillis,
        timeoutMillis,
        acknowledge: false
      })
      const released = yield* release(backend, request)
      if (Exit.isSuccess(exit)) {
        if (released._tag === "NotOwner") {
          yield* Metrics.lost(settings.namespace, "release")
          return yield* new LockLost({
            key,
            namespace: settings.namespace,
            phase: "release",
            reason: "ownership",
            bodyCompleted: true
          })
        }
        if (released._tag === "Failed") {
          const message = `could not release lock ${key} within one second after the body completed; its lease will free it`
          yield* released.error === undefined ? Effect.logWarning(message) : Effect.logWarning(message, released.error)
        }
        return Option.some(exit.value)
      }
      // The body's own failure or interruption (or LockLost from renewal) always wins over release.
      return yield* Effect.failCause(exit.cause)
    })
  ).pipe(Effect.withSpan(mode === "wait" ? "Lock.withLock" : "Lock.tryWithLock", { attributes: { "lock.key": key } }))

/**
 * Builds a lock client for keys of type `K` over the `LockBackend` in context.
 *
 * **Details**
 * Fails with `InvalidArgument` when `leaseDuration` is unparsable, not finite, not positive or under
 * 30 ms, or when `namespace` is empty or contains `{`/`}`.
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
) => Effect.Effect<LockClient<K>, InvalidArgument, LockBackend> = Effect.fnUntraced(function* <K = string>(
  options: LockOptions<K> = {}
) {
  const settings = yield* makeSettings(options)
  const backend = yield* LockBackend
  const codec = (options.keyCodec ?? KeyCodec.string) as KeyCodec.KeyCodec<K>
  const tryBudget = Math.min(tryBudgetMillis, settings.usableLeaseMillis)
  const queue = LocalQueue.make()
  const client: LockClient<K> = {
    namespace: settings.namespace,
    leaseDuration: Duration.millis(settings.leaseMillis),
    withLock: (key, callOptions) => (body) =>
      Effect.gen(function* () {
        const waitMillis = yield* positiveMillis("waitTimeout", callOptions?.waitTimeout)
        const redisKey = yield* encodeKey(codec, settings.namespace, key)
        const start = yield* nowMillis
        const result = yield* queue.withTurn(
          redisKey,
          "wait",
          waitMillis,
          Effect.flatMap(nowMillis, (now) =>
            runLocked(backend, settings, redisKey, waitMillis - (now - start), "wait", body)
          ),
          // Another fiber of this client held or waited for the key the whole time.
          Effect.flatMap(nowMillis, (now) =>
            Effect.fail(
              new TimedOut({
                key: redisKey,
                namespace: settings.namespace,
                waitedMillis: Math.round(now - start),
                attempts: 0,
                reason: "busy"
              })
            )
          )
        )
        // "wait" mode never yields None: a busy lock is retried until TimedOut.
        return Option.getOrThrow(result)
      }),
    tryWithLock: (key) => (body) =>
      Effect.flatMap(encodeKey(codec, settings.namespace, key), (redisKey) =>
        queue.withTurn(
          redisKey,
          "try",
          0,
          runLocked(backend, settings, redisKey, tryBudget, "try", body),
          Effect.succeed(Option.none())
        )
      )
  }
  return client
})

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
export const layer = (options?: LockOptions<string>): Layer.Layer<Lock, InvalidArgument, LockBackend> =>
  Layer.effect(Lock, make(options))

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
): Layer.Layer<Lock, InvalidArgument | Config.ConfigError, LockBackend> =>
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
  <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E | LockError, R | Lock> =>
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
  <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<Option.Option<A>, E | LockError, R | Lock> =>
    Lock.use((lock) => lock.tryWithLock(key)(body))
