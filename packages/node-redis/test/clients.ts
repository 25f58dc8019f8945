// node-redis clients the tests connect themselves (as an application or an operator would), closed
// with the test's scope.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { ClusterTopology, SentinelTopology } from "@sage/lock-testkit"
import { createClient, createCluster, createSentinel } from "redis"

const newClient = (url: string) => createClient({ url })
const newCluster = (topology: ClusterTopology.ClusterTopology) =>
  createCluster({ rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) })
const newSentinel = (topology: SentinelTopology.SentinelTopology) =>
  createSentinel({ name: topology.masterName, sentinelRootNodes: topology.sentinelNodes })
type Client = ReturnType<typeof newClient>
type Cluster = ReturnType<typeof newCluster>
type Sentinel = ReturnType<typeof newSentinel>

/** A connected standalone client for `url`. */
export const connectClient = (url: string): Effect.Effect<Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = newClient(url)
      client.on("error", () => {})
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )

/** A connected Cluster client over every node of `topology`. */
export const connectCluster = (topology: ClusterTopology.ClusterTopology): Effect.Effect<Cluster, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const cluster = newCluster(topology)
      cluster.on("error", () => {})
      await cluster.connect()
      return cluster
    }),
    (cluster) => Effect.promise(() => cluster.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )

/** A connected Sentinel client for the master of `topology`. */
export const connectSentinel = (
  topology: SentinelTopology.SentinelTopology
): Effect.Effect<Sentinel, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const sentinel = newSentinel(topology)
      sentinel.on("error", () => {})
      await sentinel.connect()
      return sentinel
    }),
    (sentinel) => Effect.promise(() => sentinel.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )
