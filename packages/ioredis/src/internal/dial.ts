// The Cluster backend's pool connections over ioredis: one plain client per connection, to one node,
// with the application's node options (auth, TLS, ...). It never reconnects and never queues a
// command while disconnected: the pool drops a broken one and opens another.
import type { RedisOptions } from "ioredis"
import type { DialedConnection } from "@sage/lock-node-redis/CommandCluster"
import { ConnectionGone } from "./classify.ts"
import { nodeClient } from "./nodeClient.ts"
import { corkedSend } from "./corked.ts"

const closed = new Set(["close", "end", "disconnecting"])

export const dial =
  (options: RedisOptions) =>
  (node: { readonly host: string; readonly port: number }): DialedConnection => {
    const redis = nodeClient(options, node, {
      retryStrategy: () => null,
      enableOfflineQueue: false,
      autoResubscribe: false
    })
    const send = corkedSend(redis)
    // ioredis rejects a failed connect with "Connection is closed."; the socket's own error says why.
    let lastError: unknown
    redis.on("error", (error: unknown) => {
      lastError = error
    })
    let destroyed = false
    return {
      // ioredis can report `ready` on a socket the server already closed (one at its `maxclients`
      // accepts, answers an error and closes): its stream tells.
      get isOpen() {
        return !closed.has(redis.status) && redis.stream?.destroyed !== true
      },
      get isReady() {
        return redis.status === "ready" && redis.stream?.writable === true
      },
      // A connect that ended without a socket error (the server closed it at once, as one at its
      // `maxclients` does after its error reply) is a reset, worth retrying: never "closed for good".
      connect: () =>
        redis.connect().catch(() => {
          throw lastError ?? Object.assign(new Error("the connection closed while connecting"), { code: "ECONNRESET" })
        }),
      send: (args) =>
        send(args).catch((error: unknown) => {
          // A socket that closed under a command, not the pool closing it: worth retrying elsewhere.
          throw !destroyed && closed.has(redis.status)
            ? new ConnectionGone("the connection closed before the reply came", error)
            : error
        }),
      destroy: () => {
        destroyed = true
        redis.disconnect()
      }
    }
  }
