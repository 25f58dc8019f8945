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
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import { LockBackend } from "@sage/lock"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import type { RedisClientOptions, RedisClusterOptions } from "redis"
import * as Address from "./internal/address.ts"
import * as ClusterTopology from "./internal/cluster.ts"
import * as Connecting from "./internal/connecting.ts"
import * as Pool from "./internal/pool.ts"
import { makeBackend } from "./internal/replicated.ts"
import * as SentinelTopology from "./internal/sentinel.ts"
import * as SharedSentinelTopology from "./internal/sharedSentinel.ts"
import * as SilentConnection from "./internal/silentConnection.ts"
import * as Standalone from "./internal/standalone.ts"
import { maxTimerMillis } from "./internal/timerDelay.ts"
import { valueText } from "./internal/valueText.ts"

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
   * made no difference (`docs/benchmarks-history.md`, sessions 7 and 26); a single caller sees no
   * difference. Wake-ups add one subscriber connection.
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
 * Shared connections to a Sentinel master: every lock operation goes to that one server, so it gets
 * two, as the standalone layer does; a Cluster client keeps one per master (see `Pool.make`).
 */
const sentinelSharedLanes = 2

/**
 * A Sentinel master takes every acquisition, so acknowledged ones that come together are committed
 * as a group (one `ROLE` and one `WAIT` for several scripts); on Cluster batches per master stay
 * small and it did not pay (see `internal/groupCommit.ts`).
 */
const sentinelOptions = { groupCommit: true } as const

// Values and reasons can hold URLs or addresses with credentials: passwords never reach an error.
const invalid = (field: string, value: unknown, reason: string): InvalidArgument =>
  new InvalidArgument({
    field,
    value: Address.redactCredentials(valueText(value)),
    reason: Address.redactCredentials(reason)
  })

/**
 * A URL node-redis would throw on (with the password on the error) is refused here instead. The
 * value is shown with everything before its last `@` hidden: a URL that does not parse cannot be
 * trusted to say where its password ends.
 */
const checkUrl = (field: string, url: unknown): Effect.Effect<void, InvalidArgument> => {
  const problem = url === undefined ? undefined : Address.checkRedisUrl(url)
  return problem === undefined
    ? Effect.void
    : Effect.fail(invalid(field, typeof url === "string" ? Address.redactUrl(url) : url, `the URL ${problem}`))
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Whether `value` is an object with these methods (a client of the kind a function expects). */
const hasMethods = (value: unknown, names: ReadonlyArray<string>): boolean =>
  typeof value === "object" &&
  value !== null &&
  names.every((name) => typeof (value as Record<string, unknown>)[name] === "function")

/**
 * Why a client the application passes (`fromClient`, `fromSentinel`, `fromCluster`) cannot be
 * used, if it cannot: it is not the kind of node-redis client asked for, or it is not connected.
 */
const unusableClient = (
  field: string,
  client: unknown,
  kind: { readonly methods: ReadonlyArray<string>; readonly what: string; readonly also?: boolean }
): InvalidArgument | undefined => {
  if (!hasMethods(client, kind.methods) || kind.also === false) {
    return invalid(field, typeof client, `must be a node-redis ${kind.what}`)
  }
  if ((client as { readonly isOpen?: unknown }).isOpen !== true) {
    return invalid(field, "not connected", "connect the client before building the lock on it")
  }
  return undefined
}

/**
 * node-redis client options the lock passes on (the standalone options, a Sentinel's node or
 * sentinel options, a Cluster's defaults): an object, its URL one node-redis can parse, and a
 * `socket` that names a usable host and port when it names them. node-redis would otherwise throw
 * with the URL (and its password) on the error, or quietly connect to 127.0.0.1:6379.
 */
const checkClientOptions = (field: string, options: unknown): Effect.Effect<void, InvalidArgument> =>
  Effect.gen(function* () {
    if (options === undefined) return
    if (!isRecord(options)) return yield* invalid(field, options, "must be an options object")
    const prefix = field === "options" ? "" : `${field}.`
    yield* checkUrl(`${prefix}url`, options["url"])
    for (const name of ["username", "password"]) {
      const value = options[name]
      // The value itself is never shown: it may be the password.
      if (value !== undefined && typeof value !== "string") {
        return yield* invalid(`${prefix}${name}`, typeof value, "must be a string")
      }
    }
    const database = options["database"]
    if (database !== undefined && !(Number.isInteger(database) && (database as number) >= 0)) {
      return yield* invalid(`${prefix}database`, database, "must be an integer of at least 0")
    }
    const socket = options["socket"]
    if (socket === undefined) return
    if (!isRecord(socket)) return yield* invalid(`${field}.socket`, socket, "must be an object")
    const host = socket["host"]
    if (host !== undefined) {
      const problem = Address.checkHost(host)
      if (problem !== undefined) return yield* invalid(`${field}.socket.host`, host, problem)
    }
    const port = socket["port"]
    if (port !== undefined) {
      const problem = Address.checkPort(port)
      if (problem !== undefined) return yield* invalid(`${field}.socket.port`, port, problem)
    }
  })

const validate = (
  options: CommonOptions
): Effect.Effect<{ maxConnections: number; connectTimeout: number }, InvalidArgument> => {
  if (!isRecord(options as unknown)) return Effect.fail(invalid("options", options, "must be an options object"))
  const pool = options.dedicatedPool
  if (pool !== undefined && !isRecord(pool as unknown)) {
    return Effect.fail(invalid("dedicatedPool", pool, "must be an object, e.g. { maxConnections: 10 }"))
  }
  const max = pool?.maxConnections ?? 10
  if (!(Number.isInteger(max) && max >= 1)) {
    return Effect.fail(invalid("dedicatedPool.maxConnections", max, "must be an integer of at least 1"))
  }
  const connectTimeout = options.connectTimeoutMillis ?? 10_000
  if (!(typeof connectTimeout === "number" && connectTimeout > 0 && connectTimeout <= maxTimerMillis)) {
    return Effect.fail(
      invalid(
        "connectTimeoutMillis",
        connectTimeout,
        `must be positive and at most ${maxTimerMillis} (about 24.8 days)`
      )
    )
  }
  return Effect.succeed({ maxConnections: max, connectTimeout })
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

/** The standalone options checked (no I/O), and the connect they describe. */
const prepare = (options: Options): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const { connectTimeout } = yield* validate(options)
    yield* checkClientOptions("options", options)
    const connections = options.connections ?? 2
    if (!(Number.isInteger(connections) && connections >= 1 && connections <= 16)) {
      return yield* Effect.fail(invalid("connections", connections, "must be an integer from 1 to 16"))
    }
    const {
      dedicatedPool: _pool,
      connectTimeoutMillis: _timeout,
      connections: _connections,
      ...clientOptions
    } = options
    return Effect.gen(function* () {
      const [first, ...others] = yield* Effect.forEach(
        Array.from({ length: connections }),
        () =>
          SilentConnection.watch({
            open: Standalone.connect(Address.withoutBracketedUrl(clientOptions) as RedisClientOptions, connectTimeout)
          }),
        { concurrency: "unbounded" }
      )
      return yield* Standalone.fromClients([first!, ...others], "node-redis standalone")
    })
  })

/** What a checked set of options connects: the connected backend, its connections in the scope. */
type Connect = Effect.Effect<LockBackend.Backend, LockRedisError | InvalidArgument, Scope.Scope>

/**
 * A node-redis client the application already owns, as accepted by `fromClient`/`layerFromClient`:
 * what `createClient` returns, connected by the application (it must report `isOpen`; only
 * `sendCommand` and `duplicate` are used).
 *
 * @category models
 * @since 0.2.0
 */
export type SharedClient = Standalone.SharedClient

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
  Effect.suspend(() => {
    // A client never connected, or closed, would fail every command with "The client is closed".
    const unusable = unusableClient("client", client, {
      methods: ["sendCommand", "duplicate"],
      what: "client (createClient)"
    })
    if (unusable !== undefined) return Effect.fail(unusable)
    return Standalone.fromClients([client], "node-redis standalone (shared client)")
  })

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
): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    const { maxConnections } = yield* validate(options)
    const unusable = unusableClient("sentinel", sentinel, {
      methods: ["getMasterNode", "getReplicaNodes", "subscribe", "unsubscribe"],
      what: "Sentinel client (createSentinel)"
    })
    if (unusable !== undefined) return yield* unusable
    const pool = yield* Pool.make({
      maxConnections,
      clientOptions: options.nodeClientOptions ?? {},
      sharedLanes: sentinelSharedLanes
    })
    return yield* makeBackend(SharedSentinelTopology.topology(sentinel), pool, undefined, {
      ...sentinelOptions,
      sharedSubscriber: true
    })
  })

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
): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    const { maxConnections } = yield* validate(options)
    const unusable = unusableClient("cluster", cluster, {
      methods: ["sendCommand", "sSubscribe", "sUnsubscribe"],
      what: "Cluster client (createCluster)",
      also: Array.isArray((cluster as { readonly slots?: unknown } | null)?.slots)
    })
    if (unusable !== undefined) return yield* unusable
    const own = cluster._options
    const pool = yield* Pool.make({
      maxConnections,
      clientOptions: (options.defaults ?? own?.defaults ?? {}) as RedisClientOptions,
      resolve: ClusterTopology.addressMapper(
        options.nodeAddressMap ?? (own?.nodeAddressMap as RedisClusterOptions["nodeAddressMap"])
      )
    })
    return yield* makeBackend(
      ClusterTopology.topology(cluster, "node-redis cluster (shared client)"),
      pool,
      undefined,
      { sharedSubscriber: true }
    )
  })

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

/** The Sentinel options checked (no I/O), and the connect they describe. */
const prepareSentinel = (options: SentinelOptions): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const { connectTimeout, maxConnections } = yield* validate(options)
    if (typeof options.name !== "string" || options.name.length === 0) {
      return yield* invalid("name", options.name, "the master name must be a non-empty string")
    }
    if (!Array.isArray(options.sentinels) || options.sentinels.length === 0) {
      return yield* invalid("sentinels", options.sentinels, "at least one sentinel is needed")
    }
    for (const node of options.sentinels) {
      const problem = Address.checkHost(node?.host) ?? Address.checkPort(node?.port)
      if (problem !== undefined) return yield* invalid("sentinels", node, problem)
    }
    yield* checkClientOptions("nodeClientOptions", options.nodeClientOptions)
    yield* checkClientOptions("sentinelClientOptions", options.sentinelClientOptions)
    return Effect.gen(function* () {
      const topology = yield* SentinelTopology.connect(
        {
          name: options.name,
          sentinels: options.sentinels.map(({ host, port }) => ({ host, port })),
          sentinelClientOptions: options.sentinelClientOptions,
          nodeClientOptions: options.nodeClientOptions
        },
        connectTimeout
      )
      const pool = yield* Pool.make({
        maxConnections,
        clientOptions: options.nodeClientOptions ?? {},
        sharedLanes: sentinelSharedLanes
      })
      return yield* makeBackend(topology, pool, undefined, sentinelOptions)
    })
  })

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

/** The Cluster options checked (no I/O), and the connect they describe. */
const prepareCluster = (options: ClusterOptions): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const { connectTimeout, maxConnections } = yield* validate(options)
    if (!Array.isArray(options.rootNodes) || options.rootNodes.length === 0) {
      return yield* invalid("rootNodes", options.rootNodes, "at least one node is needed")
    }
    for (const node of options.rootNodes) {
      if (!isRecord(node) || (node["url"] === undefined && node["socket"] === undefined)) {
        return yield* invalid("rootNodes", node, "each node needs a url or socket options")
      }
      yield* checkClientOptions("rootNodes", node)
    }
    yield* checkClientOptions("defaults", options.defaults)
    return Effect.gen(function* () {
      const cluster = yield* ClusterTopology.connect(
        {
          rootNodes: options.rootNodes.map((node) => Address.withoutBracketedUrl(node)),
          ...(options.defaults === undefined ? {} : { defaults: options.defaults }),
          ...(options.nodeAddressMap === undefined ? {} : { nodeAddressMap: options.nodeAddressMap })
        } as RedisClusterOptions,
        connectTimeout
      )
      const pool = yield* Pool.make({
        maxConnections,
        clientOptions: (options.defaults ?? {}) as RedisClientOptions,
        resolve: ClusterTopology.addressMapper(options.nodeAddressMap)
      })
      return yield* makeBackend(
        ClusterTopology.topology(cluster, undefined, ClusterTopology.watchShardedPubSub(cluster)),
        pool
      )
    })
  })

/**
 * The layer of checked options: it fails at once on a bad option, and otherwise provides the backend
 * while it connects (see `LockBackend.Backend.connected`): the lock's layer then checks its own
 * options before it waits for the connection, and fails with the connection's failure.
 */
const connectingLayer = <E>(
  description: string,
  prepared: Effect.Effect<Connect, E>
): Layer.Layer<LockBackend.LockBackend, E> =>
  Layer.effect(
    LockBackend.LockBackend,
    Effect.flatMap(prepared, (connect) => Connecting.backend(description, connect))
  )

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
  connectingLayer("node-redis standalone", prepare(options))

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
  connectingLayer("node-redis sentinel", prepareSentinel(options))

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
  connectingLayer("node-redis cluster", prepareCluster(options))

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

const auth = (config: ConfigAuth) => ({
  ...(config.username === undefined ? {} : { username: config.username }),
  ...(config.password === undefined ? {} : { password: Redacted.value(config.password) })
})

const pool = (config: ConfigAuth) =>
  config.maxConnections === undefined ? {} : { dedicatedPool: { maxConnections: config.maxConnections } }

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
  connectingLayer(
    "node-redis standalone",
    Effect.flatMap(Config.unwrap(options), (config) =>
      prepare({
        url: config.url,
        ...auth(config),
        ...pool(config),
        ...(config.connections === undefined ? {} : { connections: config.connections })
      })
    )
  )

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

/** The non-empty, trimmed entries of a comma-separated list. */
const commaList = (list: string): Array<string> =>
  list
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)

/**
 * The Sentinel backend configured from `Config`, e.g. `REDIS_SENTINELS=10.0.0.5:26379,10.0.0.6:26379`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layerSentinelConfig = (
  options: Config.Wrap<SentinelConfigOptions>
): Layer.Layer<LockBackend.LockBackend, InvalidArgument | Config.ConfigError> =>
  connectingLayer(
    "node-redis sentinel",
    Effect.gen(function* () {
      const config = yield* Config.unwrap(options)
      const sentinels: Array<Address.HostPort> = []
      for (const entry of commaList(config.sentinels)) {
        const parsed = Address.parse(entry)
        if (Result.isFailure(parsed)) return yield* invalid("sentinels", config.sentinels, parsed.failure)
        sentinels.push(parsed.success)
      }
      return yield* prepareSentinel({ name: config.name, sentinels, nodeClientOptions: auth(config), ...pool(config) })
    })
  )

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
  connectingLayer(
    "node-redis cluster",
    Effect.gen(function* () {
      const config = yield* Config.unwrap(options)
      const urls = commaList(config.nodes)
      for (const url of urls) {
        const problem = Address.checkRedisUrl(url)
        if (problem !== undefined) return yield* invalid("nodes", config.nodes, `"${url}" ${problem}`)
      }
      return yield* prepareCluster({ rootNodes: urls.map((url) => ({ url })), defaults: auth(config), ...pool(config) })
    })
  )
