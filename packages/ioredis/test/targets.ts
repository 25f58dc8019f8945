// Test targets: a real server started by the test kit, the ioredis backend on it (over its own
// connections, or over a client the test owns as an application would), and the ServerControl the
// contract suite uses on that same server.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Cluster, Redis } from "ioredis"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, RedisServer, SentinelTopology, type ServerBinary } from "@sage/lock-testkit"
import * as ServerControl from "@sage/lock-testkit/contract/ServerControl"
import * as IoredisBackend from "../src/IoredisBackend.ts"

export type Target = Layer.Layer<LockBackend | ServerControl.ServerControl, unknown>

/** A server of `flavor` and the backend over connections of its own. */
export const ownTarget = (flavor: ServerBinary.Flavor, options: IoredisBackend.Options = {}): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const backend = yield* IoredisBackend.make({ host: "127.0.0.1", port: server.port, ...options })
      return Context.make(LockBackend, backend).pipe(
        Context.add(ServerControl.ServerControl, ServerControl.ofServer(server))
      )
    })
  )

/** An ioredis client on `url` that the test owns, closed (then dropped) with the scope. */
export const ownedClient = (url: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Redis(url, { retryStrategy: () => 50 })
      client.on("error", () => {})
      return client
    }),
    (client) =>
      Effect.promise(() => client.quit().catch(() => undefined)).pipe(
        Effect.timeoutOption(1_000),
        Effect.ensuring(Effect.sync(() => client.disconnect()))
      )
  )

/** A server of `flavor` and the backend over a client the test owns (as an application would). */
export const sharedTarget = (flavor: ServerBinary.Flavor): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const client = yield* ownedClient(server.url)
      const backend = yield* IoredisBackend.fromClient(client)
      return Context.make(LockBackend, backend).pipe(
        Context.add(ServerControl.ServerControl, ServerControl.ofServer(server))
      )
    })
  )

/**
 * Three masters with one replica each, and the Cluster backend on them over a cluster client of its
 * own. The node timeout is long enough that the servers the contract suite pauses stay masters.
 */
export const clusterTarget = (flavor: ServerBinary.Flavor, options: IoredisBackend.ClusterOptions = {}): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor, nodeTimeoutMillis: 8_000 })
      const backend = yield* IoredisBackend.makeCluster(topology.rootNodes, options)
      const control = ServerControl.via(`${flavor} cluster`, (key) => Effect.orDie(topology.masterFor(key)))
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )

/** An ioredis `Cluster` on `nodes` that the test owns, connected, and closed (then dropped) with the scope. */
export const ownedCluster = (nodes: ReadonlyArray<{ readonly host: string; readonly port: number }>) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const cluster = new Cluster([...nodes], { lazyConnect: true })
      cluster.on("error", () => {})
      await cluster.connect()
      return cluster
    }),
    (cluster) =>
      Effect.promise(() => cluster.quit().catch(() => undefined)).pipe(
        Effect.timeoutOption(1_000),
        Effect.ensuring(Effect.sync(() => cluster.disconnect()))
      )
  )

/** A Cluster as `clusterTarget`, and the backend over an ioredis `Cluster` the test owns. */
export const sharedClusterTarget = (flavor: ServerBinary.Flavor): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor, nodeTimeoutMillis: 8_000 })
      const cluster = yield* ownedCluster(topology.rootNodes)
      const backend = yield* IoredisBackend.fromClient(cluster)
      const control = ServerControl.via(`${flavor} cluster (shared client)`, (key) =>
        Effect.orDie(topology.masterFor(key))
      )
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )

/**
 * A master with two replicas and three sentinels, and the Sentinel backend on it over connections of
 * its own. The sentinels' down-after time is long enough that the servers the contract suite pauses
 * stay masters.
 */
export const sentinelTarget = (flavor: ServerBinary.Flavor, options: IoredisBackend.Options = {}): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
      const backend = yield* IoredisBackend.make({
        sentinels: topology.sentinelNodes,
        name: topology.masterName,
        ...options
      })
      const control = ServerControl.via(`${flavor} sentinel`, () => Effect.orDie(topology.master()))
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )

/**
 * A Sentinel deployment as `sentinelTarget`, and the backend built from an ioredis client the test
 * owns, connected through the sentinels (the lock reads its options and opens its own connections).
 */
export const sharedSentinelTarget = (flavor: ServerBinary.Flavor): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
      const client = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const owned = new Redis({ sentinels: topology.sentinelNodes, name: topology.masterName })
          owned.on("error", () => {})
          return owned
        }),
        (owned) => Effect.sync(() => owned.disconnect())
      )
      const backend = yield* IoredisBackend.fromClient(client)
      const control = ServerControl.via(`${flavor} sentinel (shared client)`, () => Effect.orDie(topology.master()))
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )
