/**
 * Distributed counting semaphores for Effect programs, on Redis and Valkey: at most `limit` permits
 * of one key held at once, across every process.
 *
 * `withPermits(key, { limit, permits, waitTimeout })(body)` waits in the server's line until its
 * permits are free, runs the body while the client's renewal scheduler renews their lease, and
 * releases them whatever the body's outcome; `tryWithPermits` does not wait; `acquire` holds permits
 * for the lifetime of a `Scope`. The body gets a `Lease` with the grant's fencing token, as a lock's
 * body does, and the errors mean what they mean for a lock.
 *
 * **Guarantees and limits**
 * - Each holder's permits expire on the server's clock at the end of their lease; renewal keeps them
 *   while the body runs, and a lease that cannot be confirmed stops the body with `LockLost`.
 * - The line is first come, first served across processes: a request waits while anyone who asked
 *   earlier still waits, so a request for many permits is never starved by requests for few.
 * - Every caller of one semaphore gives the same `limit`: it is stored with the semaphore while
 *   anyone holds or waits for permits, and a call with another limit fails with `InvalidArgument`
 *   naming both. Once nobody holds or waits, the next caller's limit takes over.
 * - As with a lock, a process paused past its lease, or a failover that loses the keys, can let more
 *   than `limit` permits be held at once: fencing tokens (one sequence per semaphore) let the
 *   resource tell grants apart. See `docs/semaphores.md`.
 *
 * @since 0.2.1
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as KeyCodec from "./KeyCodec.ts"
import type { Handle, Lease } from "./Lease.ts"
import { LockBackend } from "./LockBackend.ts"
import type { InvalidArgument, LockError, LockRedisError } from "./LockError.ts"
import * as Calls from "./internal/calls.ts"
import { grantingWaiterPrefix, ownChannelWaiterPrefix, pollingWaiterPrefix } from "./internal/lua.ts"
import { acquireScoped } from "./internal/scoped.ts"
import * as SemaphoreCalls from "./internal/semaphoreCalls.ts"
import { checkKeyCodec, checkOptions, invalid, makeSettings, tryBudgetMillis } from "./internal/settings.ts"
import * as WaiterIds from "./internal/waiterIds.ts"

/**
 * Options of a semaphore client. Validated once, when the client or layer is built.
 *
 * @category options
 * @since 0.2.1
 */
export interface SemaphoreOptions<K = string> {
  /**
   * How long permits stay valid without renewal. Defaults to 30 seconds; at least 30 milliseconds.
   * A crashed holder keeps its permits for up to one lease.
   */
  readonly leaseDuration?: Duration.Input | undefined
  /** Prefix of every semaphore key. Defaults to `"semaphore"`. */
  readonly namespace?: string | undefined
  /** How keys become Redis key text. Defaults to `KeyCodec.string`. */
  readonly keyCodec?: KeyCodec.KeyCodec<K> | undefined
  /** On Sentinel and Cluster, wait for replicas to acknowledge grants and renewals. Defaults to `true`. */
  readonly replicaAcknowledgement?: boolean | undefined
}

/**
 * How many permits of how many a call asks for.
 *
 * @category options
 * @since 0.2.1
 */
export interface PermitsOptions {
  /** The semaphore's size: at most this many permits are held at once. A whole number, at least 1. */
  readonly limit: number
  /** How many permits the call holds. Defaults to 1; at most `limit`. */
  readonly permits?: number | undefined
}

/**
 * Per-call options of `withPermits`.
 *
 * @category options
 * @since 0.2.1
 */
export interface WithPermitsOptions extends PermitsOptions {
  /** How long to wait for the permits: finite and positive. When it runs out the call fails with `TimedOut`. */
  readonly waitTimeout: Duration.Input
}

/**
 * Per-call options of `acquire`.
 *
 * @category options
 * @since 0.2.1
 */
export interface AcquirePermitsOptions extends WithPermitsOptions {
  /**
   * When the permits are lost while the scope is open and nothing waits on `lease.lost`, interrupt
   * the fiber that called `acquire`. Defaults to `true`.
   */
  readonly interruptOnLoss?: boolean | undefined
}

/**
 * A semaphore client for keys of type `K`.
 *
 * @category models
 * @since 0.2.1
 */
export interface SemaphoreClient<K> {
  /** The validated namespace. */
  readonly namespace: string
  /** The validated lease. */
  readonly leaseDuration: Duration.Duration
  /**
   * Waits for `permits` of the semaphore's `limit`, runs the body while renewing their lease,
   * releases them, and returns the body's result. Fails with `TimedOut` (body not run), `LockLost`
   * (body interrupted, or found unprotected at release), `InvalidArgument` (bad options, or another
   * limit in use) or a non-retryable `LockRedisError`.
   */
  readonly withPermits: (
    key: K,
    options: WithPermitsOptions
  ) => <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | LockError, Exclude<R, Lease>>
  /**
   * Runs the body only if the permits are free now and nobody waits ahead: `Option.none()` otherwise
   * (body not run), `Option.some(result)` after the body ran and the permits were released.
   */
  readonly tryWithPermits: (
    key: K,
    options: PermitsOptions
  ) => <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<Option.Option<A>, E | LockError, Exclude<R, Lease>>
  /**
   * Waits for the permits as `withPermits` does and holds them, renewed, until the scope closes.
   * A loss while the scope is open fails `lease.lost`, and interrupts the calling fiber unless
   * something waits on it or `interruptOnLoss` is false.
   */
  readonly acquire: (key: K, options: AcquirePermitsOptions) => Effect.Effect<Handle, LockError, Scope.Scope>
}

/**
 * The semaphore service for string keys, as provided by `Semaphore.layer`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Semaphore } from "@sage/lock"
 *
 * const callPartner = Effect.gen(function*() {
 *   const semaphores = yield* Semaphore.Semaphore
 *   // at most 4 calls to the partner's API at once, across every process
 *   return yield* semaphores.withPermits("partner-api", { limit: 4, waitTimeout: "10 seconds" })(
 *     Effect.succeed("called")
 *   )
 * })
 * ```
 *
 * @category services
 * @since 0.2.1
 */
export class Semaphore extends Context.Service<Semaphore, SemaphoreClient<string>>()("@sage/lock/Semaphore") {}

/**
 * Builds a semaphore client for keys of type `K` over the `LockBackend` in context. Its renewal
 * scheduler lives in the scope.
 *
 * **Details**
 * Fails with `InvalidArgument` on the options a lock client refuses (see `Lock.make`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Semaphore } from "@sage/lock"
 *
 * const program = Effect.gen(function*() {
 *   const gpus = yield* Semaphore.make({ namespace: "gpus", leaseDuration: "20 seconds" })
 *   yield* gpus.withPermits("cluster-a", { limit: 8, permits: 2, waitTimeout: "1 minute" })(
 *     Effect.log("training on two of eight GPUs")
 *   )
 * })
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const make: <K = string>(
  options?: SemaphoreOptions<K>
) => Effect.Effect<SemaphoreClient<K>, InvalidArgument | LockRedisError, LockBackend | Scope.Scope> = Effect.fnUntraced(
  function* <K = string>(options: SemaphoreOptions<K> = {}) {
    yield* checkOptions(options)
    const settings = yield* makeSettings({ ...options, namespace: options.namespace ?? "semaphore" })
    const codec = yield* checkKeyCodec(options.keyCodec, KeyCodec.string as unknown as KeyCodec.KeyCodec<K>)
    const service = yield* LockBackend
    const backend = service.connected === undefined ? service : yield* service.connected
    const lockShared = yield* Calls.makeShared(backend, settings)
    const shared: SemaphoreCalls.Client = {
      ...lockShared,
      waiterIds: WaiterIds.make(
        backend.wakeups === undefined
          ? pollingWaiterPrefix
          : backend.wakeups.grants === true
            ? grantingWaiterPrefix
            : ownChannelWaiterPrefix
      )
    }
    const tryBudget = Math.min(tryBudgetMillis, settings.usableLeaseMillis)
    const client: SemaphoreClient<K> = {
      namespace: settings.namespace,
      leaseDuration: Duration.millis(settings.leaseMillis),
      withPermits: (key, callOptions) => (body) => SemaphoreCalls.withPermits(shared, codec, key, callOptions, body),
      tryWithPermits: (key, callOptions) => (body) =>
        SemaphoreCalls.tryWithPermits(shared, codec, tryBudget, key, callOptions, body),
      acquire: (key, callOptions) => {
        const interruptOnLoss: unknown = callOptions?.interruptOnLoss
        return interruptOnLoss === undefined || typeof interruptOnLoss === "boolean"
          ? acquireScoped(client.withPermits(key, callOptions), interruptOnLoss !== false, shared.warnings)
          : Effect.fail(invalid("interruptOnLoss", interruptOnLoss, "must be a boolean"))
      }
    }
    return client
  }
)

/**
 * The `Semaphore` service for string keys, over the `LockBackend` in context.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Semaphore } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const SemaphoreLive = Semaphore.layer({ namespace: "partner-api" }).pipe(
 *   Layer.provide(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379" }))
 * )
 * ```
 *
 * @category layers
 * @since 0.2.1
 */
export const layer = (
  options?: SemaphoreOptions<string>
): Layer.Layer<Semaphore, InvalidArgument | LockRedisError, LockBackend> => Layer.effect(Semaphore, make(options))

/**
 * `withPermits` of the `Semaphore` service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Semaphore } from "@sage/lock"
 *
 * const nightly = Semaphore.withPermits("exports", { limit: 2, waitTimeout: "30 seconds" })(
 *   Effect.log("one of at most two exports running")
 * )
 * ```
 *
 * @category accessors
 * @since 0.2.1
 */
export const withPermits =
  (key: string, options: WithPermitsOptions) =>
  <A, E, R>(body: Effect.Effect<A, E, R>): Effect.Effect<A, E | LockError, Exclude<R, Lease> | Semaphore> =>
    Semaphore.use((semaphore) => semaphore.withPermits(key, options)(body))

/**
 * `tryWithPermits` of the `Semaphore` service.
 *
 * @category accessors
 * @since 0.2.1
 */
export const tryWithPermits =
  (key: string, options: PermitsOptions) =>
  <A, E, R>(
    body: Effect.Effect<A, E, R>
  ): Effect.Effect<Option.Option<A>, E | LockError, Exclude<R, Lease> | Semaphore> =>
    Semaphore.use((semaphore) => semaphore.tryWithPermits(key, options)(body))

/**
 * `acquire` of the `Semaphore` service.
 *
 * @category accessors
 * @since 0.2.1
 */
export const acquire = (
  key: string,
  options: AcquirePermitsOptions
): Effect.Effect<Handle, LockError, Scope.Scope | Semaphore> =>
  Semaphore.use((semaphore) => semaphore.acquire(key, options))
