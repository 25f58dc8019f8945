// The Sentinel backend's connections over ioredis: one client per sentinel (the application's
// sentinel credentials and TLS) and one subscriber to the master, each reconnecting with the lock's
// backoff; the pool's connections to the master are dial.ts's. None runs ioredis's own Sentinel
// client: the lock keeps its own view of the master (CommandSentinel).
import type { RedisOptions } from "ioredis"
import { reconnectDelay } from "@sage/lock-node-redis/CommandBackend"
import type { SentinelConnection, SubscriberConnection } from "@sage/lock-node-redis/CommandSentinel"
import { nodeClient } from "./nodeClient.ts"
import { subscribing } from "./subscriber.ts"
import { sendOn } from "./send.ts"

/** The options the lock reads from an ioredis client's or layer's options for its Sentinel backend. */
export interface SentinelSettings {
  readonly name: string
  readonly sentinels: ReadonlyArray<{ readonly host: string; readonly port: number }>
  /** For the connections to the sentinels. */
  readonly sentinelOptions: RedisOptions
  /** For the connections to the master (auth, TLS, db). */
  readonly nodeOptions: RedisOptions
}

const sentinelKeys = [
  "sentinels",
  "name",
  "role",
  "sentinelUsername",
  "sentinelPassword",
  "sentinelTLS",
  "enableTLSForSentinelMode",
  "sentinelRetryStrategy",
  "sentinelReconnectStrategy",
  "sentinelCommandTimeout",
  "sentinelMaxConnections",
  "natMap",
  "updateSentinels",
  "failoverDetector",
  "preferredSlaves"
]

/**
 * What `options` (ioredis `RedisOptions` with `sentinels`) say of the sentinels and the master: the
 * sentinels' own credentials and TLS (`sentinelUsername`, `sentinelPassword`, `sentinelTLS` when
 * `enableTLSForSentinelMode`), and everything else for the master.
 */
export const sentinelSettings = (options: RedisOptions): SentinelSettings => {
  const nodeOptions: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(options)) if (!sentinelKeys.includes(key)) nodeOptions[key] = value
  return {
    name: options.name ?? "",
    sentinels: (options.sentinels ?? []).map((node) => ({ host: node.host ?? "localhost", port: node.port ?? 26379 })),
    sentinelOptions: {
      ...(options.sentinelUsername === undefined ? {} : { username: options.sentinelUsername }),
      ...(options.sentinelPassword === undefined ? {} : { password: options.sentinelPassword }),
      ...(options.enableTLSForSentinelMode === true && options.sentinelTLS !== undefined
        ? { tls: options.sentinelTLS }
        : {})
    },
    nodeOptions: nodeOptions as RedisOptions
  }
}

/** A client to one sentinel, connecting in the background and refusing questions while disconnected. */
export const sentinelConnection =
  (options: RedisOptions) =>
  (node: { readonly host: string; readonly port: number }): SentinelConnection => {
    const redis = nodeClient(options, node, { retryStrategy: reconnectDelay, enableOfflineQueue: false })
    // Never awaited: a stalled sentinel may hold its connect forever, and nothing waits for it.
    redis.connect().catch(() => {})
    return { send: sendOn(redis), destroy: () => redis.disconnect() }
  }

/** A subscriber connection to the master for wake-ups; it subscribes its channels again on reconnect. */
export const subscriberConnection =
  (options: RedisOptions) =>
  (node: { readonly host: string; readonly port: number }): SubscriberConnection => {
    // The lock resubscribes itself (subscriber.ts): ioredis's own resubscription can end the process.
    const redis = nodeClient(options, node, { retryStrategy: reconnectDelay, autoResubscribe: false })
    const { subscriber, drop } = subscribing(redis)
    return {
      get isReady() {
        return redis.status === "ready"
      },
      connect: () => redis.connect(),
      send: sendOn(redis),
      subscribe: subscriber.subscribe,
      unsubscribe: drop,
      destroy: () => redis.disconnect()
    }
  }
