// The Sentinel topology read from a node-redis Sentinel client the application owns
// (`createSentinel`), instead of the lock's own sentinel clients (sentinel.ts).
//
// The application's client already follows the master (it listens to the sentinels' switch-master
// and down events and re-reads the topology); the lock takes the master's address from it, and
// wake-ups use its pub/sub connection, which follows failovers too. Lock writes do not go through
// it: `WAIT` counts only the writes made on its own connection, and the client's master connections
// are a small pool the application's commands share (`masterPoolSize`, default 1), so an exclusive
// lease (`acquire()`) held through a `WAIT` for a slow replica would stall the application. The
// writes, `ROLE` and `WAIT` run on the lock's dedicated pool to the master the client names.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { LockRedisError } from "@sage/lock/LockError"
import * as Address from "../../connection/address.ts"
import type { Route, Topology } from "../topology.ts"

/** What the lock needs of a connected node-redis Sentinel client. */
export interface SentinelClient {
  readonly isOpen: boolean
  getMasterNode(): { readonly host: string; readonly port: number } | undefined
  getReplicaNodes(): ReadonlyMap<{ readonly host: string; readonly port: number }, number>
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>
  /** node-redis types this listener for both buffer and string mode; it is the one `subscribe` got. */
  unsubscribe(channel: string, listener: (message: unknown) => void): Promise<unknown>
}

const noMaster = (): LockRedisError =>
  new LockRedisError({
    command: "route",
    kind: "server",
    code: "MASTERDOWN",
    reply: "the shared Sentinel client has no ready master connection right now",
    retryable: true,
    mayHaveExecuted: false
  })

/**
 * The replicas the client has ready connections to (`replicas`), and all it lists (`knownReplicas`):
 * right after a failover it lists the new master's replicas before their connections are back, and
 * a write then waits for them rather than failing with `NO_REPLICAS`. Both undefined when it keeps
 * no replica connections (`replicaPoolSize` 0, the default), so the master's own list counts.
 */
const replicasInView = (client: SentinelClient): Pick<Route, "replicas" | "knownReplicas"> => {
  const nodes = client.getReplicaNodes()
  if (nodes.size === 0) return { replicas: undefined }
  let ready = 0
  for (const connections of nodes.values()) if (connections > 0) ready++
  return { replicas: ready, knownReplicas: nodes.size }
}

export const topology = (client: SentinelClient): Topology => {
  const master = (): string | undefined => {
    const node = client.getMasterNode()
    return node === undefined ? undefined : Address.format({ host: node.host, port: node.port })
  }
  return {
    description: "node-redis sentinel (shared client)",
    route: () => {
      const address = master()
      return address === undefined ? Result.fail(noMaster()) : Result.succeed({ address, ...replicasInView(client) })
    },
    isMaster: (_key, address) => master() === address,
    // The client re-reads the topology on the sentinels' events; nothing here can make it sooner.
    refresh: () => Effect.void,
    publish: "PUBLISH",
    subscriber: () =>
      Promise.resolve({
        subscribe: (channel, listener) => client.subscribe(channel, listener),
        unsubscribe: (channel, listener) => client.unsubscribe(channel, listener as (message: unknown) => void)
      })
  }
}
