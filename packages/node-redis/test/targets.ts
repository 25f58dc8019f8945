// Test targets: a real server started by the test kit, the node-redis backend connected to it, and
// the ServerControl the contract suite uses to observe and disturb that same server.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, RedisServer, SentinelTopology, type ServerBinary } from "@sage/lock-testkit"
import * as ServerControl from "@sage/lock-testkit/contract/ServerControl"
import { createClient, createCluster, createSentinel } from "redis"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

/** The contract's view of a deployment, given how to find the node that owns a key. */
export const controlVia = ServerControl.via

/** The contract's view of one standalone server. */
export const controlFor = ServerControl.ofServer

/** A server of `flavor` and the standalone backend on it, as the contract suite's target. */
export const standaloneTarget = (
  flavor: ServerBinary.Flavor,
  options: NodeRedisBackend.Options = {}
): Layer.Layer<LockBackend | ServerControl.ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const backend = yield* NodeRedisBackend.make({ url: server.url, ...options })
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, controlFor(server)))
    })
  )

/**
 * A server of `flavor` and the standalone backend over a client the test owns (as an application
 * would): the lock shares the client's connection and never closes it.
 */
export const sharedClientTarget = (
  flavor: ServerBinary.Flavor
): Layer.Layer<LockBackend | ServerControl.ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const client = yield* Effect.acquireRelease(
        Effect.promise(() => {
          const owned = createClient({ url: server.url, socket: { reconnectStrategy: () => 50 } })
          owned.on("error", () => {})
          return owned.connect()
        }),
        (owned) => Effect.promise(() => owned.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
      )
      const backend = yield* NodeRedisBackend.fromClient(client)
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, controlFor(server)))
    })
  )

/**
 * A master with two replicas under three sentinels, and the Sentinel backend on it. Sentinel's
 * down-after is long (8 s) so the contract's short freezes never trigger a failover; failover
 * tests start their own topology.
 */
export const sentinelTarget = (
  flavor: ServerBinary.Flavor,
  options: Partial<NodeRedisBackend.SentinelOptions> = {}
): Layer.Layer<LockBackend | ServerControl.ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
      const backend = yield* NodeRedisBackend.makeSentinel({
        name: topology.masterName,
        sentinels: topology.sentinelNodes,
        ...options
      })
      const control = controlVia(`${flavor} sentinel`, () => Effect.orDie(topology.master()))
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )

/**
 * Three masters with one replica each, and the Cluster backend on them. The node timeout is long
 * (8 s) so the contract's short freezes never trigger a failover.
 */
export const clusterTarget = (
  flavor: ServerBinary.Flavor,
  options: Partial<NodeRedisBackend.ClusterOptions> = {}
): Layer.Layer<LockBackend | ServerControl.ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor, nodeTimeoutMillis: 8_000 })
      const backend = yield* NodeRedisBackend.makeCluster({
        rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
        ...options
      })
      const control = controlVia(`${flavor} cluster`, (key) => Effect.orDie(topology.masterFor(key)))
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )

/**
 * A Sentinel topology as `sentinelTarget`, and the backend over a Sentinel client the test owns (as
 * an application would, with node-redis's defaults: no replica connections, so acknowledgement
 * counts the replicas the master lists).
 */
export const sharedSentinelTarget = (
  flavor: ServerBinary.Flavor
): Layer.Layer<LockBackend | ServerControl.ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
      const sentinel = yield* Effect.acquireRelease(
        Effect.promise(() => {
          const owned = createSentinel({ name: topology.masterName, sentinelRootNodes: topology.sentinelNodes })
          owned.on("error", () => {})
          return owned.connect()
        }),
        (owned) => Effect.promise(() => owned.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
      )
      const backend = yield* NodeRedisBackend.fromSentinel(sentinel)
      const control = controlVia(`${flavor} sentinel (shared client)`, () => Effect.orDie(topology.master()))
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )

/**
 * A Cluster as `clusterTarget`, and the backend over a Cluster client the test owns (node-redis's
 * defaults: no `useReplicas`, so acknowledgement counts the replicas each master lists).
 */
export const sharedClusterTarget = (
  flavor: ServerBinary.Flavor
): Layer.Layer<LockBackend | ServerControl.ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor, nodeTimeoutMillis: 8_000 })
      const cluster = yield* Effect.acquireRelease(
        Effect.promise(() => {
          const owned = createCluster({
            rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
          })
          owned.on("error", () => {})
          return owned.connect()
        }),
        (owned) => Effect.promise(() => owned.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
      )
      const backend = yield* NodeRedisBackend.fromCluster(cluster)
      const control = controlVia(`${flavor} cluster (shared client)`, (key) => Effect.orDie(topology.masterFor(key)))
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl.ServerControl, control))
    })
  )
