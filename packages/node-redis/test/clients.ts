// node-redis clients the tests connect themselves (as an application or an operator would), closed
// with the test's scope.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { ClusterTopology, SentinelTopology } from "@sage/lock-testkit"
import { createClient, createCluster, createSentinel } from "redis"

/** An ACL user to connect as (the default user when absent). */
export interface Credentials {
  readonly username: string
  readonly password: string
}

const newClient = (url: string, credentials?: Credentials) => createClient({ url, ...credentials })
const newCluster = (topology: ClusterTopology.ClusterTopology, credentials?: Credentials) =>
  createCluster({
    rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
    ...(credentials ? { defaults: credentials } : {})
  })
const newSentinel = (topology: SentinelTopology.SentinelTopology, credentials?: Credentials) =>
  createSentinel({
    name: topology.masterName,
    sentinelRootNodes: topology.sentinelNodes,
    ...(credentials ? { nodeClientOptions: credentials } : {})
  })
type Client = ReturnType<typeof newClient>
type Cluster = ReturnType<typeof newCluster>
type Sentinel = ReturnType<typeof newSentinel>

/** A connected standalone client for `url`. */
export const connectClient = (url: string, credentials?: Credentials): Effect.Effect<Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = newClient(url, credentials)
      client.on("error", () => {})
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )

/** A connected Cluster client over every node of `topology`. */
export const connectCluster = (
  topology: ClusterTopology.ClusterTopology,
  credentials?: Credentials
): Effect.Effect<Cluster, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const cluster = newCluster(topology, credentials)
      cluster.on("error", () => {})
      await cluster.connect()
      return cluster
    }),
    (cluster) => Effect.promise(() => cluster.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )

/** A connected Sentinel client for the master of `topology`. */
export const connectSentinel = (
  topology: SentinelTopology.SentinelTopology,
  credentials?: Credentials
): Effect.Effect<Sentinel, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const sentinel = newSentinel(topology, credentials)
      sentinel.on("error", () => {})
      await sentinel.connect()
      return sentinel
    }),
    (sentinel) => Effect.promise(() => sentinel.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )
