/**
 * The lock backend over ioredis: locks, semaphores, read-write locks and elections on one Redis or
 * Valkey server, over connections the lock opens (`make`, `layer`) or over an ioredis client the
 * application already has (`fromClient`, `layerFromClient`), which the lock never closes.
 *
 * **Details**
 * - The protocol is the node-redis backend's, run through `CommandBackend`: one script per
 *   operation, each lock key always on the same connection, renewals of every held lock batched,
 *   every command bounded by what is left of its caller's budget (ioredis's own timeouts are left
 *   as they are), failures classified from ioredis's errors.
 * - Wake-ups: a release wakes the next waiter in another process through pub/sub, on one duplicate
 *   of the client that the lock owns, opened the first time a lock is waited for.
 * - Cluster: `makeCluster` (a cluster client of the lock's own) and `fromClient` given an ioredis
 *   `Cluster` read the slot map from ioredis and send each operation to its key's master on a
 *   connection of the lock's own pool, with the master's role checked and, when asked, its replicas'
 *   acknowledgement (`WAIT`) on that connection; wake-ups use sharded pub/sub.
 * - Sentinel is not supported over ioredis yet: a client made with `sentinels` is refused with
 *   `InvalidArgument` (use the node-redis backend's `makeSentinel`).
 * - node-redis is not loaded (its package is a dependency for the shared protocol code only).
 *
 * @since 0.2.1
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { Cluster, ClusterNode, ClusterOptions as IoredisClusterOptions, Redis, RedisOptions } from "ioredis"
import { LockBackend } from "@sage/lock"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import * as CommandBackend from "@sage/lock-node-redis/CommandBackend"
import * as CommandCluster from "@sage/lock-node-redis/CommandCluster"
import * as CommandSentinel from "@sage/lock-node-redis/CommandSentinel"
import { classify } from "./internal/classify.ts"
import { type ClusterClient, connectCluster, natResolver, shardedSubscriber, slotMap } from "./internal/cluster.ts"
import { connect } from "./internal/connect.ts"
import { dial } from "./internal/dial.ts"
import { sentinelConnection, sentinelSettings, subscriberConnection } from "./internal/sentinel.ts"
import { replaceable } from "./internal/replaceable.ts"
import { duplicateSubscriber } from "./internal/subscriber.ts"
import { sendOn } from "./internal/send.ts"

/**
 * Options of `make` and `layer`: ioredis's `RedisOptions` (host, port, path, username, password,
 * db, tls, ...), and the lock's own. ioredis's `connectTimeout` (default 10 seconds) also bounds the
 * layer: it fails with `LockRedisError` when a connection is not ready by then.
 *
 * @category options
 * @since 0.2.1
 */
export interface Options extends Omit<RedisOptions, "lazyConnect"> {
  /**
   * How many pipelined connections carry lock commands (an integer from 1 to 16; default 2). Each
   * lock key always uses the same one, so its commands stay in order; with two, the client prepares
   * one connection's commands while the server runs the other's. Wake-ups add one connection.
   */
  readonly connections?: number | undefined
  /** Whether waiters are woken by releases in other processes (default `true`); otherwise they poll. */
  readonly wakeups?: boolean | undefined
  /**
   * With `sentinels`: the connections the lock opens to the master at most (an integer of at least
   * 1; default 10).
   */
  readonly maxConnections?: number | undefined
}

/**
 * Options of `makeCluster`: ioredis's `ClusterOptions` (`redisOptions` for every node's auth and TLS,
 * `natMap`, ...), and the lock's own.
 *
 * @category options
 * @since 0.2.1
 */
export interface ClusterOptions extends Omit<IoredisClusterOptions, "lazyConnect"> {
  /** Connections the lock opens to each master at most (an integer of at least 1; default 10). */
  readonly maxConnections?: number | undefined
  /** Whether waiters are woken by releases in other processes (default `true`); otherwise they poll. */
  readonly wakeups?: boolean | undefined
  /** How long the layer waits for the cluster's slot map (milliseconds; default 10 seconds). */
  readonly connectTimeoutMillis?: number | undefined
}

/**
 * An ioredis client the application owns, connected to one server (not through sentinels). The
 * lock sends its commands on it and duplicates it once for wake-ups.
 *
 * @category models
 * @since 0.2.1
 */
export type SharedClient = Pick<Redis, "call" | "duplicate" | "options">

/**
 * An ioredis `Cluster` the application owns. The lock reads its slot map, opens its own connections
 * to the masters (with the cluster's `redisOptions`) and duplicates it once for wake-ups.
 *
 * @category models
 * @since 0.2.1
 */
export type SharedCluster = ClusterClient & Pick<Cluster, "isCluster">

const invalid = (field: string, value: unknown, reason: string) =>
  new InvalidArgument({ field, value: describe(value), reason })

const describe = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  if (typeof value === "object" && value !== null) return Object.prototype.toString.call(value)
  return String(value)
}

/** A time limit in milliseconds: a positive, finite number. */
const checkMillis = (field: string, value: unknown): Effect.Effect<void, InvalidArgument> =>
  typeof value === "number" && value > 0 && Number.isFinite(value)
    ? Effect.void
    : Effect.fail(invalid(field, value, "must be a positive number of milliseconds"))

const sentinelsOf = (options: unknown): unknown =>
  typeof options === "object" && options !== null ? (options as { readonly sentinels?: unknown }).sentinels : undefined

const connectionOf = (client: Pick<Redis, "call">): CommandBackend.Connection => ({
  send: sendOn(client)
})

/**
 * The backend over connections of its own, opened with `options` and closed with the scope. Fails
 * with `LockRedisError` when the server cannot be reached within `connectTimeout`.
 *
 * @category constructors
 * @since 0.2.1
 */
export const make = (
  options: Options = {}
): Effect.Effect<LockBackend.Backend, InvalidArgument | LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    if (typeof options !== "object" || options === null || Array.isArray(options)) {
      return yield* invalid("options", options, "must be an options object")
    }
    if (sentinelsOf(options) !== undefined) return yield* sentinelBackend(options, "ioredis sentinel")
    const { connections = 2, wakeups = true, ...redisOptions } = options
    const connectTimeout = options.connectTimeout ?? 10_000
    if (!Number.isInteger(connections) || connections < 1 || connections > 16) {
      return yield* invalid("connections", connections, "must be an integer from 1 to 16")
    }
    yield* checkMillis("connectTimeout", connectTimeout)
    if (typeof wakeups !== "boolean") return yield* invalid("wakeups", wakeups, "must be a boolean")
    // The first client opened: the wake-up subscriber is a duplicate of it.
    let first: Redis | undefined
    const open = Effect.tap(connect(redisOptions as RedisOptions, connectTimeout), (client) =>
      Effect.sync(() => {
        first ??= client
      })
    )
    // Each connection is replaced should it go silent.
    const watched = yield* Effect.forEach(
      Array.from({ length: connections }),
      () => CommandBackend.replaceWhenSilent({ open: Effect.map(open, replaceable), classify }),
      { concurrency: "unbounded" }
    )
    return yield* CommandBackend.make({
      description: "ioredis standalone",
      connections: watched,
      subscriber: wakeups ? yield* duplicateSubscriber(first!) : undefined,
      classify
    })
  })

/**
 * The backend over an ioredis client the application owns, which the lock never closes.
 * - A `Redis`: lock commands share its connection; only the wake-up subscriber (a duplicate of it)
 *   is the lock's, and closes with the scope.
 * - A `Cluster`: the lock reads its slot map and sends each operation to the key's master on a
 *   connection of its own (opened with the cluster's `redisOptions`), so a `WAIT` never blocks the
 *   application's connections; wake-ups use a duplicate of it with sharded subscribers. Both close
 *   with the scope.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Redis } from "ioredis"
 * import { Lock } from "@sage/lock"
 * import { IoredisBackend } from "@sage/lock-ioredis"
 *
 * const redis = new Redis("redis://127.0.0.1:6379")
 * const LockLive = Lock.layer({ namespace: "billing" }).pipe(Layer.provide(IoredisBackend.layerFromClient(redis)))
 *
 * const program = Lock.withLock("invoice-42", { waitTimeout: "5 seconds" })(Effect.log("one at a time")).pipe(
 *   Effect.provide(LockLive)
 * )
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const fromClient = (
  client: SharedClient | SharedCluster,
  options: SharedOptions = {}
): Effect.Effect<LockBackend.Backend, InvalidArgument | LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    if (typeof client !== "object" || client === null) {
      return yield* invalid("client", client, "must be an ioredis client (new Redis(...) or new Cluster(...))")
    }
    if ((client as { readonly isCluster?: unknown }).isCluster === true) {
      return yield* clusterBackend(client as SharedCluster, "ioredis cluster (shared client)", options)
    }
    const redis = client as SharedClient
    if (typeof redis.call !== "function") {
      return yield* invalid("client", client, "must be an ioredis client (new Redis(...) or new Cluster(...))")
    }
    if (sentinelsOf(redis.options) !== undefined && sentinelsOf(redis.options) !== null) {
      return yield* sentinelBackend(
        { ...redis.options, wakeups: options.wakeups, maxConnections: options.maxConnections },
        "ioredis sentinel (options of a shared client)"
      )
    }
    const wakeups = options.wakeups ?? true
    if (typeof wakeups !== "boolean") return yield* invalid("wakeups", wakeups, "must be a boolean")
    return yield* CommandBackend.make({
      description: "ioredis (shared client)",
      connections: [connectionOf(redis)],
      subscriber: wakeups ? yield* duplicateSubscriber(redis) : undefined,
      classify
    })
  })

/**
 * Options of `fromClient`. `maxConnections` applies to a `Cluster` only (the connections the lock
 * opens to each master, an integer of at least 1; default 10).
 *
 * @category options
 * @since 0.2.1
 */
export interface SharedOptions {
  readonly wakeups?: boolean | undefined
  readonly maxConnections?: number | undefined
}

/**
 * The Sentinel backend over connections of its own: the lock asks the sentinels itself (with
 * `sentinelUsername`, `sentinelPassword`, `sentinelTLS`) and connects to the master they name with
 * the other options.
 */
const sentinelBackend = (
  options: Options,
  description: string
): Effect.Effect<LockBackend.Backend, InvalidArgument | LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const { connections: _connections, wakeups = true, maxConnections, ...redisOptions } = options
    if (typeof wakeups !== "boolean") return yield* invalid("wakeups", wakeups, "must be a boolean")
    const sentinels = sentinelsOf(redisOptions)
    if (!Array.isArray(sentinels) || sentinels.length === 0) {
      return yield* invalid("sentinels", sentinels, "at least one sentinel is needed")
    }
    const settings = sentinelSettings(redisOptions as RedisOptions)
    const connectTimeoutMillis = options.connectTimeout ?? 10_000
    yield* checkMillis("connectTimeout", connectTimeoutMillis)
    return yield* CommandSentinel.make({
      description,
      name: settings.name,
      sentinels: settings.sentinels,
      sentinel: sentinelConnection(settings.sentinelOptions),
      dial: dial(settings.nodeOptions),
      subscriber: wakeups ? subscriberConnection(settings.nodeOptions) : undefined,
      maxConnections,
      connectTimeoutMillis,
      classify
    })
  })

/** The Cluster backend over `cluster`'s slot map, with connections of its own to each master. */
const clusterBackend = (
  cluster: ClusterClient,
  description: string,
  options: { readonly wakeups?: boolean | undefined; readonly maxConnections?: number | undefined }
): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    if (!Array.isArray(cluster.slots) || typeof cluster.refreshSlotsCache !== "function") {
      return yield* invalid("client", cluster, "must be an ioredis Cluster (new Cluster(...))")
    }
    const wakeups = options.wakeups ?? true
    if (typeof wakeups !== "boolean") return yield* invalid("wakeups", wakeups, "must be a boolean")
    const clusterOptions = cluster.options ?? {}
    return yield* CommandCluster.make({
      description,
      slots: slotMap(cluster),
      dial: dial((clusterOptions.redisOptions ?? {}) as RedisOptions),
      resolve: natResolver(clusterOptions.natMap),
      maxConnections: options.maxConnections,
      subscriber: wakeups ? yield* shardedSubscriber(cluster) : undefined,
      classify
    })
  })

/**
 * The backend on a Redis Cluster, over a cluster client of its own (`new Cluster(nodes, options)`)
 * for the slot map, connections of its own to each master, and sharded pub/sub for wake-ups; all
 * closed with the scope. Fails with `LockRedisError` when no slot map comes within
 * `connectTimeoutMillis`.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { IoredisBackend } from "@sage/lock-ioredis"
 *
 * const LockLive = Lock.layer({ namespace: "billing" }).pipe(
 *   Layer.provide(IoredisBackend.layerCluster([{ host: "10.0.0.1", port: 7000 }, { host: "10.0.0.2", port: 7000 }]))
 * )
 * const program = Lock.withLock("invoice-42", { waitTimeout: "5 seconds" })(Effect.log("one at a time")).pipe(
 *   Effect.provide(LockLive)
 * )
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const makeCluster = (
  nodes: ReadonlyArray<ClusterNode>,
  options: ClusterOptions = {}
): Effect.Effect<LockBackend.Backend, InvalidArgument | LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    if (!Array.isArray(nodes) || nodes.length === 0) {
      return yield* invalid("nodes", nodes, "must be a non-empty array of cluster nodes")
    }
    if (typeof options !== "object" || options === null || Array.isArray(options)) {
      return yield* invalid("options", options, "must be an options object")
    }
    const { connectTimeoutMillis = 10_000, maxConnections, wakeups, ...clusterOptions } = options
    yield* checkMillis("connectTimeoutMillis", connectTimeoutMillis)
    if (maxConnections !== undefined && (!Number.isInteger(maxConnections) || maxConnections < 1)) {
      return yield* invalid("maxConnections", maxConnections, "must be an integer of at least 1")
    }
    const cluster: Cluster = yield* connectCluster(nodes, clusterOptions, connectTimeoutMillis)
    return yield* clusterBackend(cluster, "ioredis cluster", { wakeups, maxConnections })
  })

/**
 * The `LockBackend` layer on a Redis Cluster, over connections of its own (see `makeCluster`).
 *
 * @category layers
 * @since 0.2.1
 */
export const layerCluster = (
  nodes: ReadonlyArray<ClusterNode>,
  options?: ClusterOptions
): Layer.Layer<LockBackend.LockBackend, InvalidArgument | LockRedisError> =>
  Layer.effect(LockBackend.LockBackend, makeCluster(nodes, options))

/**
 * The `LockBackend` layer over connections of its own (see `make`).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Semaphore } from "@sage/lock"
 * import { IoredisBackend } from "@sage/lock-ioredis"
 *
 * const SemaphoreLive = Semaphore.layer({ namespace: "partner-api" }).pipe(
 *   Layer.provide(IoredisBackend.layer({ host: "127.0.0.1", port: 6379 }))
 * )
 * const call = Semaphore.withPermits("quota", { limit: 4, waitTimeout: "10 seconds" })(Effect.log("one of four")).pipe(
 *   Effect.provide(SemaphoreLive)
 * )
 * ```
 *
 * @category layers
 * @since 0.2.1
 */
export const layer = (options?: Options): Layer.Layer<LockBackend.LockBackend, InvalidArgument | LockRedisError> =>
  Layer.effect(LockBackend.LockBackend, make(options))

/**
 * The `LockBackend` layer over an ioredis client the application owns (see `fromClient`).
 *
 * @category layers
 * @since 0.2.1
 */
export const layerFromClient = (
  client: SharedClient | SharedCluster,
  options?: SharedOptions
): Layer.Layer<LockBackend.LockBackend, InvalidArgument | LockRedisError> =>
  Layer.effect(LockBackend.LockBackend, fromClient(client, options))
