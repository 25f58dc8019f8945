// The Cluster backend's pool connections over ioredis: one plain client per connection, to one node,
// with the application's node options (auth, TLS, ...). It never reconnects and never queues a
// command while disconnected: the pool drops a broken one and opens another.
import { Redis, type RedisOptions } from "ioredis"
import type { DialedConnection } from "@sage/lock-node-redis/CommandCluster"
import { Dropped } from "./classify.ts"

const closed = new Set(["close", "end", "disconnecting"])

export const dial =
  (options: RedisOptions) =>
  (node: { readonly host: string; readonly port: number }): DialedConnection => {
    const redis = new Redis({
      ...options,
      host: node.host,
      port: node.port,
      lazyConnect: true,
      retryStrategy: () => null,
      enableOfflineQueue: false,
      // No ready check: it asks INFO, which a least-privilege lock user may not run.
      enableReadyCheck: false,
      autoResubscribe: false,
      enableAutoPipelining: false
    })
    // ioredis rejects a failed connect with "Connection is closed."; the socket's own error says why.
    let lastError: unknown
    redis.on("error", (error: unknown) => {
      lastError = error
    })
    let destroyed = false
    return {
      get isOpen() {
        return !closed.has(redis.status)
      },
      get isReady() {
        return redis.status === "ready"
      },
      connect: () =>
        redis.connect().catch((error: unknown) => {
          throw lastError ?? error
        }),
      send: (args) =>
        redis.call(args[0]!, ...args.slice(1)).catch((error: unknown) => {
          // A socket that closed under a command, not the pool closing it: worth retrying elsewhere.
          throw !destroyed && closed.has(redis.status) ? new Dropped(error) : error
        }),
      destroy: () => {
        destroyed = true
        redis.disconnect()
      }
    }
  }
