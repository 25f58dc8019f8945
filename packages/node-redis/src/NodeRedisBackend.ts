/**
 * node-redis backends for `@sage/lock`: standalone servers, Sentinel-managed masters with replicas,
 * and Clusters. The `Lock` service is the same over all three; only the layer changes.
 *
 * **Details**
 * - Every lock command carries its own timeout (what is left of the caller's budget), so a stalled
 *   server or a reconnecting client never stretches a deadline.
 * - The three lock scripts run by SHA1 and are re-sent transparently after `NOSCRIPT`.
 * - Socket errors are logged or classified, never thrown.
 * - Standalone: every lock operation is one script on a pipelined connection, two by default
 *   (`connections`), each lock key always on the same one.
 * - Sentinel and Cluster: each acquisition and renewal runs the script, then `ROLE`, and (with
 *   `replicaAcknowledgement`, the default) `WAIT`, on a connection from the dedicated pool (per
 *   node, `dedicatedPool.maxConnections`, default 10): `WAIT` counts the writes of its own
 *   connection. `ROLE` and `WAIT` need ACL permission. Releases, and with acknowledgement off
 *   acquisitions too, run on shared, pipelined connections instead of the pool: two to a Sentinel
 *   master, one to each Cluster master.
 *
 * - Standalone also hands a key from one fiber of a client to the next in one script (`transfer`,
 *   see `docs/semantics.md`); Sentinel and Cluster release, and the next fiber acquires.
 *
 * | deployment | acquire | renew | release | handing on to the client's next fiber |
 * | --- | --- | --- | --- | --- |
 * | standalone | script | script | script | script |
 * | Sentinel / Cluster, acknowledgement on | script, ROLE, WAIT | script, ROLE, WAIT | script | release, then acquire |
 * | Sentinel / Cluster, acknowledgement off | script, ROLE | script, ROLE | script | release, then acquire |
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { LockBackend } from "@sage/lock"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import type { RedisClientOptions, RedisClusterOptions } from "redis"
import { clusterFromConfig, sentinelFromConfig, standaloneFromConfig } from "./internal/config.ts"
import type * as Clients from "./internal/connection/clients.ts"
import * as Connecting from "./internal/connection/connecting.ts"
import type * as ClusterTopology from "./internal/replicated/cluster/cluster.ts"
import { fromSharedCluster, prepareCluster } from "./internal/replicated/cluster/prepare.ts"
import { fromSharedSentinel, prepareSentinel } from "./internal/replicated/sentinel/prepare.ts"
import type * as SharedSentinelTopology from "./internal/replicated/sentinel/sharedSentinel.ts"
import { fromSharedClient, prepare } from "./internal/standalone/prepare.ts"

/**
 * Options shared by every deployment.
 *
 * @category options
 * @since 0.1.0
 */
export interface CommonOptions {
  /**
   * The pool of connections that one lock operation holds for several commands (replicated
   * deployments). `maxConnections` (default 10) bounds it per node; a full pool delays acquisition
   * and renewal within their budgets.
   */
  readonly dedicatedPool?: { readonly maxConnections?: number | undefined } | undefined
  /** How long the layer may take to connect before it fails. Default 10 seconds. */
  readonly connectTimeoutMillis?: number | undefined
}

/**
 * Options of the standalone backend: node-redis `createClient` options (URL, socket and TLS,
 * username and password, database, name) plus the common options.
 *
 * @category options
 * @since 0.1.0
 */
export interface Options extends Omit<RedisClientOptions, "modules" | "functions" | "scripts" | "RESP">, CommonOptions {
  /**
   * How many pipelined connections carry the lock commands (an integer from 1 to 16; default 2).
   * Each lock key always uses the same one, so its commands stay in order. With two, the client
   * prepares one connection's next commands while the server runs the other's: under many
   * concurrent locks this measured about 1.6x the throughput of one connection, and more than two
   * made no difference (`npm run bench` reports this "pool decision" on every run); a single caller
   * sees no difference. Wake-ups add one subscriber connection.
   */
  readonly connections?: number | undefined
}

/**
 * Options of the Sentinel backend.
 *
 * @category options
 * @since 0.1.0
 */
export interface SentinelOptions extends CommonOptions {
  /**
   * The master name the sentinels monitor, e.g. `"mymaster"`. A name the sentinels answer "no such
   * master" for fails the layer at once with `InvalidArgument` on `name`.
   */
  readonly name: string
  /**
   * Some sentinels to start from; the client also asks the others they report. All are asked at
   * once, each question bounded, so one that is down or stalled costs nothing while another
   * answers: list more than one. A malformed address is `InvalidArgument`.
   */
  readonly sentinels: ReadonlyArray<{ readonly host: string; readonly port: number }>
  /** Options for connections to the data nodes (auth, TLS). */
  readonly nodeClientOptions?: RedisClientOptions | undefined
  /** Options for connections to the sentinels (auth, TLS). */
  readonly sentinelClientOptions?: RedisClientOptions | undefined
}

/**
 * Options of the Cluster backend.
 *
 * @category options
 * @since 0.1.0
 */
export interface ClusterOptions extends CommonOptions {
  /** Some nodes to start from (`{ url }` or client options); the client discovers the rest. */
  readonly rootNodes: RedisClusterOptions["rootNodes"]
  /** Options for every node connection (auth, TLS). */
  readonly defaults?: RedisClusterOptions["defaults"] | undefined
  /**
   * Maps the addresses nodes announce (`host:port`) to reachable ones (NAT, Docker, proxies), as in
   * node-redis: an object keyed by announced address, or a function. Both the cluster client and the
   * lock's own node connections (every lock operation, redirects included) use it.
   */
  readonly nodeAddressMap?: RedisClusterOptions["nodeAddressMap"] | undefined
}

/**
 * Connects a standalone client and returns the backend; the client closes with the scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  options: Options = {}
): Effect.Effect<LockBackend.Backend, LockRedisError | InvalidArgument, Scope.Scope> => Effect.flatten(prepare(options))

/**
 * A node-redis client the application already owns, as accepted by `fromClient`/`layerFromClient`:
 * what `createClient` returns, connected by the application (it must report `isOpen`; only
 * `sendCommand` and `duplicate` are used).
 *
 * @category models
 * @since 0.2.0
 */
export type SharedClient = Clients.SharedClient

/**
 * The standalone backend over a client the application already owns and has connected: lock
 * operations share its connection, and the lock never closes it. Wake-ups open one more connection
 * of the lock's own (a duplicate of the client, subscribing), the first time a lock is waited for,
 * and close it with the scope.
 *
 * **Gotchas**
 * The application keeps the client's `error` listener and reconnect policy; a client created with
 * `disableOfflineQueue: false` (node-redis's default) may queue lock commands while reconnecting,
 * which the lock bounds by each command's time limit. A value that is not such a client, or a client
 * not connected yet (or closed), is `InvalidArgument`.
 *
 * @category constructors
 * @since 0.2.0
 */
export const fromClient = (client: SharedClient): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> =>
  fromSharedClient(client)

/**
 * The `LockBackend` over a node-redis client the application already owns (see `fromClient`).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 * import { createClient } from "redis"
 *
 * const program = Effect.gen(function* () {
 *   const client = yield* Effect.promise(() => createClient({ url: "redis://127.0.0.1:6379" }).connect())
 *   const LockLive = Lock.layer().pipe(Layer.provide(NodeRedisBackend.layerFromClient(client)))
 *   yield* Lock.withLock("report", { waitTimeout: "1 second" })(Effect.log("one at a time")).pipe(
 *     Effect.provide(LockLive)
 *   )
 * })
 * ```
 *
 * @category layers
 * @since 0.2.0
 */
export const layerFromClient = (client: SharedClient): Layer.Layer<LockBackend.LockBackend, InvalidArgument> =>
  Layer.effect(LockBackend.LockBackend, fromClient(client))

/**
 * A node-redis Sentinel client the application owns (what `createSentinel` returns, connected), as
 * accepted by `fromSentinel`/`layerFromSentinel`: the lock reads its master and replicas and uses
 * its pub/sub.
 *
 * @category models
 * @since 0.2.0
 */
export type SharedSentinel = SharedSentinelTopology.SentinelClient

/**
 * Options of the backend over a shared Sentinel client.
 *
 * @category options
 * @since 0.2.0
 */
export interface SharedSentinelOptions {
  /**
   * Options for the lock's dedicated connections to the master (auth, TLS): give the
   * `nodeClientOptions` the client was created with (node-redis does not expose them). Default none.
   */
  readonly nodeClientOptions?: RedisClientOptions | undefined
  /** The lock's dedicated connections to the master: `maxConnections` (default 10). */
  readonly dedicatedPool?: { readonly maxConnections?: number | undefined } | undefined
}

/**
 * The Sentinel backend over a Sentinel client the application owns and has connected. The lock
 * takes the master's address from it (the client follows failovers) and receives wake-ups on its
 * pub/sub connection; it never closes the client, and drops its own subscriptions when its scope
 * closes.
 *
 * **Details**
 * Acquire and renew still run the script, `ROLE` and `WAIT` on the lock's own dedicated
 * connections to that master (pool per node, default 10): `WAIT` only counts writes made on its
 * own connection, and holding one of the client's master connections (`sentinel.acquire()`, a pool
 * of `masterPoolSize`, default 1) through a `WAIT` would stall the application's commands. The lock
 * opens no connection to any sentinel.
 *
 * **Gotchas**
 * - Created with `replicaPoolSize: 0` (node-redis's default), the client knows no replicas, so
 *   acknowledgement waits for every replica the master itself lists (`ROLE`): a frozen replica that
 *   the master has not dropped yet (its `repl-timeout`) delays acknowledgement until then. With
 *   `replicaPoolSize` above 0, replicas without a ready connection are not waited for.
 * - A failover reaches the lock when it reaches the client (node-redis listens to the sentinels'
 *   events); the lock cannot make the client re-read sooner.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 * import { createSentinel } from "redis"
 *
 * const program = Effect.gen(function* () {
 *   const sentinel = yield* Effect.promise(() =>
 *     createSentinel({ name: "mymaster", sentinelRootNodes: [{ host: "10.0.0.5", port: 26379 }] }).connect()
 *   )
 *   const LockLive = Lock.layer().pipe(Layer.provide(NodeRedisBackend.layerFromSentinel(sentinel)))
 *   yield* Lock.withLock("report", { waitTimeout: "1 second" })(Effect.log("one at a time")).pipe(
 *     Effect.provide(LockLive)
 *   )
 * })
 * ```
 *
 * @category constructors
 * @since 0.2.0
 */
export const fromSentinel = (
  sentinel: SharedSentinel,
  options: SharedSentinelOptions = {}
): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> => fromSharedSentinel(sentinel, options)

/**
 * The `LockBackend` over a Sentinel client the application owns (see `fromSentinel`).
 *
 * @category layers
 * @since 0.2.0
 */
export const layerFromSentinel = (
  sentinel: SharedSentinel,
  options?: SharedSentinelOptions
): Layer.Layer<LockBackend.LockBackend, InvalidArgument> =>
  Layer.effect(LockBackend.LockBackend, fromSentinel(sentinel, options))

/**
 * A node-redis Cluster client the application owns (what `createCluster` returns, connected), as
 * accepted by `fromCluster`/`layerFromCluster`: the lock reads its slot map, its connection options
 * and uses its sharded pub/sub.
 *
 * @category models
 * @since 0.2.0
 */
export interface SharedCluster extends ClusterTopology.ClusterClient {
  readonly isOpen: boolean
  /** The client's own options; the lock's dedicated connections reuse `defaults` and `nodeAddressMap`. */
  readonly _options?: { readonly defaults?: object | undefined; readonly nodeAddressMap?: unknown } | undefined
}

/**
 * Options of the backend over a shared Cluster client.
 *
 * @category options
 * @since 0.2.0
 */
export interface SharedClusterOptions {
  /** Options for the lock's dedicated node connections (auth, TLS). Default: the client's `defaults`. */
  readonly defaults?: RedisClusterOptions["defaults"] | undefined
  /** Announced address to reachable address. Default: the client's `nodeAddressMap`. */
  readonly nodeAddressMap?: RedisClusterOptions["nodeAddressMap"] | undefined
  /** The lock's dedicated connections per master: `maxConnections` (default 10). */
  readonly dedicatedPool?: { readonly maxConnections?: number | undefined } | undefined
}

/**
 * The Cluster backend over a Cluster client the application owns and has connected. The lock
 * routes by the client's slot map (which follows `MOVED` and failovers), asks it to re-read the map
 * after a redirect, and receives wake-ups on its sharded pub/sub; it never closes the client, and
 * drops its own subscriptions when its scope closes.
 *
 * **Details**
 * Acquire and renew run the script, `ROLE` and `WAIT` on the lock's own dedicated connections to
 * each slot's master (pool per node, default 10), connected with the client's `defaults` and
 * `nodeAddressMap`: `WAIT` only counts writes made on its own connection, and on the client's
 * per-node connection it would block the application's commands to that node.
 *
 * **Gotchas**
 * Without `useReplicas: true` the client's slot map lists no replicas, so acknowledgement waits for
 * every replica the master itself lists (`ROLE`): a frozen replica the master has not dropped yet
 * delays acknowledgement until then. With `useReplicas: true` (which also lets the client read from
 * replicas) replicas the cluster marked failed are not waited for.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 * import { createCluster } from "redis"
 *
 * const program = Effect.gen(function* () {
 *   const cluster = yield* Effect.promise(() => createCluster({ rootNodes: [{ url: "redis://10.0.0.7:7000" }] }).connect())
 *   const LockLive = Lock.layer().pipe(Layer.provide(NodeRedisBackend.layerFromCluster(cluster)))
 *   yield* Lock.withLock("report", { waitTimeout: "1 second" })(Effect.log("one at a time")).pipe(
 *     Effect.provide(LockLive)
 *   )
 * })
 * ```
 *
 * @category constructors
 * @since 0.2.0
 */
export const fromCluster = (
  cluster: SharedCluster,
  options: SharedClusterOptions = {}
): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> => fromSharedCluster(cluster, options)

/**
 * The `LockBackend` over a Cluster client the application owns (see `fromCluster`).
 *
 * @category layers
 * @since 0.2.0
 */
export const layerFromCluster = (
  cluster: SharedCluster,
  options?: SharedClusterOptions
): Layer.Layer<LockBackend.LockBackend, InvalidArgument> =>
  Layer.effect(LockBackend.LockBackend, fromCluster(cluster, options))

/**
 * Connects to a Sentinel-managed master and returns the backend; it follows failovers.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSentinel = (
  options: SentinelOptions
): Effect.Effect<LockBackend.Backend, LockRedisError | InvalidArgument, Scope.Scope> =>
  Effect.flatten(prepareSentinel(options))

/**
 * Connects to a Cluster and returns the backend; it follows slot moves and failovers.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeCluster = (
  options: ClusterOptions
): Effect.Effect<LockBackend.Backend, LockRedisError | InvalidArgument, Scope.Scope> =>
  Effect.flatten(prepareCluster(options))

/**
 * The `LockBackend` for one standalone Redis or Valkey server.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const LockLive = Lock.layer({ namespace: "billing" }).pipe(
 *   Layer.provide(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379", socket: { connectTimeout: 2000 } }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: Options = {}): Layer.Layer<LockBackend.LockBackend, InvalidArgument> =>
  Connecting.layer("node-redis standalone", prepare(options))

/**
 * The `LockBackend` for a master with replicas managed by Sentinel.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const LockLive = Lock.layer().pipe(
 *   Layer.provide(NodeRedisBackend.layerSentinel({ name: "mymaster", sentinels: [{ host: "10.0.0.5", port: 26379 }] }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerSentinel = (options: SentinelOptions): Layer.Layer<LockBackend.LockBackend, InvalidArgument> =>
  Connecting.layer("node-redis sentinel", prepareSentinel(options))

/**
 * The `LockBackend` for a Redis or Valkey Cluster.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const LockLive = Lock.layer().pipe(
 *   Layer.provide(NodeRedisBackend.layerCluster({ rootNodes: [{ url: "redis://10.0.0.7:7000" }] }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerCluster = (options: ClusterOptions): Layer.Layer<LockBackend.LockBackend, InvalidArgument> =>
  Connecting.layer("node-redis cluster", prepareCluster(options))

/**
 * Credentials and pool size shared by the `Config` layers.
 *
 * @category options
 * @since 0.1.0
 */
export interface ConfigAuth {
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  readonly maxConnections?: number | undefined
}

/**
 * The options `layerConfig` reads from `Config`.
 *
 * @category options
 * @since 0.1.0
 */
export interface ConfigOptions extends ConfigAuth {
  readonly url: string
  /** The standalone backend's `connections` (default 2). */
  readonly connections?: number | undefined
}

/**
 * The standalone backend configured from `Config`, e.g. `REDIS_URL`.
 *
 * @example
 * ```ts
 * import { Config } from "effect"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const Backend = NodeRedisBackend.layerConfig({
 *   url: Config.String("REDIS_URL"),
 *   password: Config.Redacted("REDIS_PASSWORD").pipe(Config.withDefault(undefined))
 * })
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerConfig = (
  options: Config.Wrap<ConfigOptions>
): Layer.Layer<LockBackend.LockBackend, InvalidArgument | Config.ConfigError> =>
  Connecting.layer("node-redis standalone", Effect.flatMap(Config.unwrap(options), standaloneFromConfig))

/**
 * The options `layerSentinelConfig` reads: `sentinels` is a comma-separated `host:port` list.
 *
 * @category options
 * @since 0.1.0
 */
export interface SentinelConfigOptions extends ConfigAuth {
  readonly name: string
  readonly sentinels: string
}

/**
 * The Sentinel backend configured from `Config`, e.g. `REDIS_SENTINELS=10.0.0.5:26379,10.0.0.6:26379`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerSentinelConfig = (
  options: Config.Wrap<SentinelConfigOptions>
): Layer.Layer<LockBackend.LockBackend, InvalidArgument | Config.ConfigError> =>
  Connecting.layer("node-redis sentinel", Effect.flatMap(Config.unwrap(options), sentinelFromConfig))

/**
 * The options `layerClusterConfig` reads: `nodes` is a comma-separated list of `redis://` URLs.
 *
 * @category options
 * @since 0.1.0
 */
export interface ClusterConfigOptions extends ConfigAuth {
  readonly nodes: string
}

/**
 * The Cluster backend configured from `Config`, e.g. `REDIS_CLUSTER_NODES=redis://10.0.0.7:7000`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerClusterConfig = (
  options: Config.Wrap<ClusterConfigOptions>
): Layer.Layer<LockBackend.LockBackend, InvalidArgument | Config.ConfigError> =>
  Connecting.layer("node-redis cluster", Effect.flatMap(Config.unwrap(options), clusterFromConfig))
