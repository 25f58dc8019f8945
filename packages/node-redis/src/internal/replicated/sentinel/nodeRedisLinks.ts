// The Sentinel topology's connections over node-redis: a small client per sentinel and one to the
// master for wake-ups, each reconnecting with the lock's backoff, closed for good with
// `destroyForGood` whatever state they are in.
import type { RedisClientOptions } from "redis"
import { classify } from "../../connection/classify.ts"
import { makeClients } from "../../connection/clientClass.ts"
import { defaultReconnect } from "../../connection/clients.ts"
import { type Destroyable, destroyForGood } from "../../connection/teardown.ts"
import type { Links, SubscriberLinks } from "./links.ts"

export const nodeRedisLinks = (
  sentinelOptions: RedisClientOptions | undefined,
  nodeOptions: RedisClientOptions | undefined
): Links & SubscriberLinks => {
  const sentinelClients = makeClients()
  // Built now: the first subscriber connection is opened during a waiter's acquisition.
  const nodeClients = makeClients(nodeOptions ?? {})
  return {
    sentinel: (node) => {
      const client = sentinelClients({
        ...sentinelOptions,
        socket: { reconnectStrategy: defaultReconnect, ...sentinelOptions?.socket, host: node.host, port: node.port },
        // A question to a sentinel that is not connected fails at once; another sentinel answers it.
        disableOfflineQueue: true
      } as RedisClientOptions)
      client.on("error", () => {})
      // Never awaited: a stalled sentinel may hold its handshake forever, and nothing waits for it.
      client.connect().catch(() => {})
      return client
    },
    subscriber: (node) => {
      const client = nodeClients({
        ...nodeOptions,
        socket: { reconnectStrategy: defaultReconnect, ...nodeOptions?.socket, host: node.host, port: node.port }
      } as RedisClientOptions)
      client.on("error", () => {})
      return client
    },
    // Every link this opens is a node-redis client.
    destroy: (link) => destroyForGood(link as unknown as Destroyable),
    classify
  }
}
