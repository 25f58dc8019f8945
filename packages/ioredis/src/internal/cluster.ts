// What the Cluster backend reads from an ioredis `Cluster`: its slot map (each slot's master first,
// then its replicas, as `CLUSTER SLOTS` listed them), a refresh of that map, its NAT map, and a
// sharded subscriber of the lock's own for wake-ups.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Cluster as IoredisCluster, type Cluster, type ClusterNode, type ClusterOptions } from "ioredis"
import type { LockRedisError } from "@sage/lock/LockError"
import type { Subscriber } from "@sage/lock-node-redis/CommandBackend"
import type { SlotMap } from "@sage/lock-node-redis/CommandCluster"
import { channels } from "./channels.ts"
import { close } from "./close.ts"
import { connectWithin } from "./connect.ts"

/** What the backend needs of an ioredis Cluster client. */
export type ClusterClient = Pick<Cluster, "slots" | "refreshSlotsCache" | "duplicate" | "options">

export const slotMap = (cluster: Pick<Cluster, "slots" | "refreshSlotsCache">): SlotMap => ({
  shard: (slot) => {
    const nodes = cluster.slots[slot]
    const master = nodes?.[0]
    return master === undefined ? undefined : { master, replicas: nodes!.length - 1 }
  },
  // ioredis runs one refresh at a time and calls every caller back when it ends.
  reread: () => new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()))
})

/**
 * The slot map names nodes as ioredis reached them (after `natMap`); a node an `ASK` names is
 * announced by the Cluster, and goes through `natMap` here.
 */
export const natResolver = (
  natMap: ClusterOptions["natMap"]
): ((node: string) => { readonly host: string; readonly port: number } | undefined) | undefined => {
  if (natMap === undefined || natMap === null) return undefined
  return (node) => {
    const mapped = typeof natMap === "function" ? natMap(node) : natMap[node]
    return mapped === undefined || mapped === null ? undefined : { host: mapped.host, port: mapped.port }
  }
}

/**
 * Wake-ups over ioredis: a duplicate of the cluster client that the lock owns, with a sharded
 * subscriber per master (ioredis follows the slots to their new masters and subscribes again),
 * connected the first time a lock is waited for and closed with the scope.
 */
export const shardedSubscriber = (
  cluster: Pick<Cluster, "duplicate">
): Effect.Effect<() => Promise<Subscriber>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const opened: Array<Cluster> = []
    yield* Effect.addFinalizer(() => Effect.forEach(opened, close, { concurrency: "unbounded", discard: true }))
    return async () => {
      const duplicate = cluster.duplicate([], { lazyConnect: true, shardedSubscribers: true })
      // Without a listener ioredis prints every connection error; the waiters' polls cover an outage.
      duplicate.on("error", () => {})
      opened.push(duplicate)
      const { deliver, subscriber } = channels({
        subscribe: (channel) => duplicate.ssubscribe(channel),
        unsubscribe: (channel) => duplicate.sunsubscribe(channel)
      })
      duplicate.on("smessage", deliver)
      await duplicate.connect().catch((error: unknown) => {
        duplicate.disconnect()
        throw error
      })
      return subscriber
    }
  })

/**
 * A cluster client of the lock's own, connected (it has read the slot map) within
 * `connectTimeoutMillis`, and closed with the scope.
 */
export const connectCluster = (
  nodes: ReadonlyArray<ClusterNode>,
  options: ClusterOptions,
  connectTimeoutMillis: number
): Effect.Effect<Cluster, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    // No ready checks: they ask `CLUSTER INFO` and `INFO`, which a least-privilege lock user may not
    // run; the slot map (`CLUSTER SLOTS`) is what the lock needs.
    const cluster = new IoredisCluster([...nodes], {
      enableReadyCheck: false,
      ...options,
      redisOptions: { enableReadyCheck: false, ...options.redisOptions },
      lazyConnect: true
    })
    // Every node's errors come here; the lock's own commands report what concerns them.
    let lastError: unknown
    cluster.on("error", (error: unknown) => {
      lastError = error
    })
    yield* Effect.addFinalizer(() => close(cluster))
    return yield* connectWithin(cluster, () => lastError, connectTimeoutMillis, "no cluster slot map")
  })
