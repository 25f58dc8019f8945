// The Cluster topology over node-redis: its cluster client keeps the slot map (following MOVED/ASK
// and topology changes) for slotMap.ts, and its sharded pub/sub carries the wake-ups.
import * as Effect from "effect/Effect"
import type { LockRedisError } from "@sage/lock/LockError"
import { createCluster, type RedisClusterOptions } from "redis"
import type * as Scope from "effect/Scope"
import type { HostPort } from "../../connection/address.ts"
import { connectScoped } from "../../connection/scopedClient.ts"
import {
  attemptGraceMillis,
  attemptSettled,
  type Destroyable,
  destroyForGood,
  destroyOnLateConnect,
  type Settling
} from "../../connection/teardown.ts"
import type { Subscriber } from "../../wakeups/subscriber.ts"
import type { Topology } from "../topology.ts"
import { slotOf } from "./slot.ts"
import { type SlotMap, slotMapTopology } from "./slotMap.ts"

type Cluster = ReturnType<typeof createCluster>

/**
 * What the lock needs of a connected node-redis cluster client: its slot map, a command to make it
 * re-read the map, and sharded pub/sub. Both the lock's own client and one the application shares.
 */
export interface ClusterClient {
  readonly slots: ReadonlyArray<
    | {
        readonly master: { readonly address: string }
        readonly replicas?: ReadonlyArray<unknown> | undefined
      }
    | undefined
  >
  sendCommand(
    firstKey: string,
    isReadonly: boolean,
    args: Array<string>,
    options: { timeout: number }
  ): Promise<unknown>
  sSubscribe(channel: string, listener: (message: string) => void): Promise<unknown>
  sUnsubscribe(channel: string, listener: (message: string) => void): Promise<unknown>
}

/**
 * Makes sure no node connection of the cluster client outlives its close. Runs just before the close.
 *
 * - Sharded pub/sub connections of nodes that are no longer masters are destroyed now. node-redis
 *   6.3.1 keeps a demoted master's node object (now listed as a replica) with its `pubSub` client,
 *   and its `close()` and `destroy()` only visit the pub/sub clients of current masters: after a
 *   failover that connection stays open and keeps the process from exiting (found by the fault matrix).
 * - Every other node connection is left to the close, but destroyed should it connect afterwards: a
 *   node connection still being opened when the close runs (a command or a refresh in flight) is not
 *   cancelled by node-redis, finishes connecting after the close and stays open (reproduced: each
 *   close with commands in flight left one socket per master).
 * - The close waits (up to `attemptGraceMillis`) for those attempts to report first: node-redis 5
 *   orphans the socket of an attempt that a `close()` overtakes, beyond any later destroy.
 * - Those connections are also put in `left`, for `connect` to destroy once the close is over. A
 *   node's `close()` waits for the replies of the commands in flight, forever if the node went
 *   silent (a `PING` probing a sharded subscriber, a `PTTL` sent to refresh the slot map), and the
 *   client's own `destroy()` after that bounded close reaches none of them: `close()` has already
 *   emptied the client's node list.
 */
const closeNodesForGood = (cluster: Cluster, left: Array<Destroyable>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const masters = new Set<unknown>(cluster.masters)
    const others: Array<Destroyable & Settling> = []
    for (const node of cluster.nodeByAddress.values()) {
      if (node.client !== undefined) others.push(node.client)
      if (!("pubSub" in node) || node.pubSub === undefined) continue
      if (masters.has(node)) others.push(node.pubSub.client)
      else destroyForGood(node.pubSub.client)
    }
    if (cluster.pubSubNode !== undefined) others.push(cluster.pubSubNode.client)
    others.forEach(destroyOnLateConnect)
    left.push(...others)
    return Effect.promise(() => Promise.all(others.map(attemptSettled))).pipe(
      Effect.timeoutOption(attemptGraceMillis),
      Effect.asVoid
    )
  })

/** Connects the cluster client (bounded) and closes it with the scope. */
export const connect = (
  options: RedisClusterOptions,
  timeoutMillis: number
): Effect.Effect<Cluster, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    // The node connections open when the close began. Added before the close, so this runs after it
    // (finalizers run in reverse order): whatever the bounded close left open is destroyed.
    const left: Array<Destroyable> = []
    yield* Effect.addFinalizer(() => Effect.sync(() => left.forEach(destroyForGood)))
    // `useReplicas` makes the slot map list each shard's replicas (WAIT needs their number: without it
    // every shard looks replica-less and WAIT would ask for one); `minimizeConnections` keeps the
    // client from opening a connection to each of them, which a stalled replica could hold up.
    const cluster = yield* connectScoped(
      "cluster",
      () => createCluster({ ...options, useReplicas: true, minimizeConnections: true }) as Cluster,
      timeoutMillis
    )
    // Added after the close, so it runs first.
    yield* Effect.addFinalizer(() => closeNodesForGood(cluster, left))
    return cluster
  })

/** node-redis's `nodeAddressMap` as a lookup for the dedicated pool: announced name to reachable address. */
export const addressMapper = (
  map: RedisClusterOptions["nodeAddressMap"] | undefined
): ((address: string) => HostPort | undefined) | undefined => {
  if (map === undefined) return undefined
  return (address) => {
    const mapped = typeof map === "function" ? map(address) : map[address]
    return mapped === undefined ? undefined : { host: mapped.host, port: mapped.port }
  }
}

/**
 * Silence watching for the sharded pub/sub connections of a cluster client the lock owns: each
 * master's one, which node-redis opens on the first `SSUBSCRIBE` to that master and keeps in the
 * master's node record (`pubSub`, declared in node-redis's types). A silent one is destroyed and
 * dropped from that record, so the next `SSUBSCRIBE` of its channels opens another.
 */
export const watchShardedPubSub = (cluster: Cluster): Required<Pick<Subscriber, "probed" | "discard">> => ({
  probed: (channel) => {
    const pubSub = cluster.slots[slotOf(channel)]?.master.pubSub
    return pubSub === undefined || pubSub.connectPromise !== undefined ? undefined : pubSub.client
  },
  discard: (silent) => {
    for (const master of cluster.masters) {
      const pubSub = master.pubSub
      if (pubSub === undefined || pubSub.client !== silent) continue
      // node-redis opens a new one on the next SSUBSCRIBE to this master (as after a failed connect).
      delete master.pubSub
      destroyForGood(pubSub.client)
      return true
    }
    return false
  }
})

/** A node-redis cluster client's slot map: a command on a key through it follows a MOVED. */
const slotMapOf = (cluster: ClusterClient): SlotMap => ({
  shard: (slot) => {
    const shard = cluster.slots[slot]
    // No replica list without `useReplicas` (a shared client may lack it).
    return shard === undefined ? undefined : { master: shard.master.address, replicas: shard.replicas?.length }
  },
  reread: (key, timeout) => cluster.sendCommand(key, false, ["PTTL", key], { timeout })
})

/**
 * The replicated topology over a cluster client. `watch` (only for a client the lock owns) lets a
 * silent sharded pub/sub connection be replaced; an application's client is left alone.
 */
export const topology = (
  cluster: ClusterClient,
  description = "node-redis cluster",
  watch?: Pick<Subscriber, "probed" | "discard">
): Topology =>
  slotMapTopology(slotMapOf(cluster), description, () =>
    Promise.resolve({
      subscribe: (channel, listener) => cluster.sSubscribe(channel, listener),
      unsubscribe: (channel, listener) => cluster.sUnsubscribe(channel, listener),
      ...watch
    })
  )
