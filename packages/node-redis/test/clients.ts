// node-redis clients the tests connect themselves (as an application or an operator would), closed
// with the test's scope.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { ClusterTopology } from "@sage/lock-testkit"
import { createClient, createCluster } from "redis"

const newClient = (url: string) => createClient({ url })
const newCluster = (topology: ClusterTopology.ClusterTopology) =>
  createCluster({ rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) })
type Client = ReturnType<typeof newClient>
type Cluster = ReturnType<typeof newCluster>

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
