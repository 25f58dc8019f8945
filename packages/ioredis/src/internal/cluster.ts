// What the Cluster backend reads from an ioredis `Cluster`: its slot map (each slot's master first,
// then its replicas, as `CLUSTER SLOTS` listed them), a refresh of that map, its NAT map, and a
// sharded subscriber of the lock's own for wake-ups.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Cluster as IoredisCluster, type Cluster, type ClusterNode, type ClusterOptions, type Redis } from "ioredis"
import type { LockRedisError } from "@sage/lock/LockError"
import type { Subscriber, SubscriberConnection } from "@sage/lock-node-redis/CommandBackend"
import { type SlotMap, slotOf } from "@sage/lock-node-redis/CommandCluster"
import { channels } from "./channels.ts"
import { close } from "./close.ts"
import { connectWithin } from "./connect.ts"
import { sendOn } from "./send.ts"

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
 * The group of sharded subscribers a cluster client made with `shardedSubscribers` keeps, one per
 * master: ioredis does not declare it in its types (a private field), so it is read by shape, and a
 * version without it leaves the subscribers unwatched.
 */
interface ShardedSubscriberGroup {
  getResponsibleSubscriber(slot: number): { readonly subscriberStatus: string; getInstance(): Redis | null } | undefined
}

const groupOf = (cluster: Cluster): ShardedSubscriberGroup | undefined => {
  const group: unknown = (cluster as unknown as { readonly shardedSubscribers?: unknown }).shardedSubscribers
  return typeof (group as Partial<ShardedSubscriberGroup> | undefined)?.getResponsibleSubscriber === "function"
    ? (group as ShardedSubscriberGroup)
    : undefined
}

/**
 * The sharded subscriber connection a channel is on, to watch for silence (`Subscriber.connectionFor`).
 * Closing one ends it; ioredis then re-reads the slot map, starts another for that master and
 * subscribes its channels again.
 */
const shardConnections = (cluster: Cluster): ((channel: string) => SubscriberConnection | undefined) | undefined => {
  const group = groupOf(cluster)
  if (group === undefined) return undefined
  const connections = new WeakMap<Redis, SubscriberConnection>()
  return (channel) => {
    let subscriber: ReturnType<ShardedSubscriberGroup["getResponsibleSubscriber"]>
    try {
      subscriber = group.getResponsibleSubscriber(slotOf(channel))
    } catch {
      // No slot map yet.
      return undefined
    }
    const instance = subscriber?.subscriberStatus === "connected" ? subscriber.getInstance() : null
    if (instance === null) return undefined
    let connection = connections.get(instance)
    if (connection === undefined) {
      connection = {
        get isReady() {
          return instance.status === "ready"
        },
        send: sendOn(instance),
        close: () => instance.disconnect()
      }
      connections.set(instance, connection)
    }
    return connection
  }
}

/**
 * Wake-ups over ioredis: a duplicate of the cluster client that the lock owns, with a sharded
 * subscriber per master (ioredis follows the slots to their new masters and subscribes again),
 * connected the first time a lock is waited for and closed with the scope. Each master's subscriber
 * connection is watched for silence and closed when it answers nothing (ioredis opens another).
 */
export const shardedSubscriber = (
  cluster: Pick<Cluster, "duplicate">
): Effect.Effect<() => Promise<Subscriber>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const opened: Array<Cluster> = []
    yield* Effect.addFinalizer(() => Effect.forEach(opened, close, { concurrency: "unbounded", discard: true }))
    // Asked again after one shard's connection was closed as silent: the duplicate is still in use
    // (ioredis replaces that connection), so the same subscriber is answered.
    let current: { readonly duplicate: Cluster; readonly subscriber: Subscriber } | undefined
    return async () => {
      if (current !== undefined && current.duplicate.status !== "end") return current.subscriber
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
      current = { duplicate, subscriber: { ...subscriber, connectionFor: shardConnections(duplicate) } }
      return current.subscriber
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
