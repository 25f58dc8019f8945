// The dedicated pool's node-redis connections.
import type { RedisClientOptions } from "redis"
import { classify } from "../connection/classify.ts"
import { makeClients } from "../connection/clientClass.ts"
import { type Destroyable, destroyForGood } from "../connection/teardown.ts"
import type { Dialer } from "./dialer.ts"

/**
 * The pool's node-redis connections: the user's options (auth, TLS, ...) with the node's host and
 * port, never reconnected, and commands refused while disconnected rather than queued.
 */
export const nodeRedisDialer = (clientOptions: RedisClientOptions): Dialer => {
  const clients = makeClients(clientOptions)
  return {
    open: ({ host, port }) => {
      const client = clients({
        ...clientOptions,
        socket: { ...clientOptions.socket, host, port, reconnectStrategy: false },
        disableOfflineQueue: true
      } as RedisClientOptions)
      client.on("error", () => {})
      return client
    },
    // Every client this dialer opens is a node-redis client.
    destroy: (client) => destroyForGood(client as unknown as Destroyable),
    classify
  }
}
