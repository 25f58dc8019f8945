// The Cluster topology over any client's slot map: each key's master comes from the client's view of
// the slots (which it keeps current, following MOVED and topology changes); lock operations go to
// that master on the pool's dedicated connections; wake-ups use sharded pub/sub.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { LockRedisError } from "@sage/lock/LockError"
import type { Subscriber } from "../../wakeups/subscriber.ts"
import type { Topology } from "../topology.ts"
import { slotOf } from "./slot.ts"

/**
 * One slot's master, named as the Cluster names it (`host:port`, what `MOVED` and `ROLE` replies
 * say), and how many replicas the client's view lists for it (`undefined` when the client keeps no
 * replica list: the master's own list then counts).
 *
 * @category models
 * @since 0.2.1
 */
export interface Shard {
  readonly master: string
  readonly replicas: number | undefined
}

/**
 * The client's view of the Cluster's slots.
 *
 * @category models
 * @since 0.2.1
 */
export interface SlotMap {
  /** The shard serving `slot` (0 to 16383) in the client's current view: a plain look-up, no I/O. */
  readonly shard: (slot: number) => Shard | undefined
  /**
   * Makes the client re-read its slot map (after a `MOVED`, a role change or a dead node), `key`'s
   * slot first if it can tell. The backend waits for it at most `timeoutMillis`.
   */
  readonly reread: (key: string, timeoutMillis: number) => Promise<unknown>
}

const slotCount = 16384

const unserved = (key: string, slot: number): LockRedisError =>
  new LockRedisError({
    command: "route",
    kind: "server",
    code: "CLUSTERDOWN",
    reply: `no master is known for slot ${slot} (key ${key})`,
    retryable: true,
    mayHaveExecuted: false
  })

/**
 * The replicated topology over a client's slot map, with `subscriber` (if any) for sharded wake-ups.
 *
 * A slot map lists only healthy replicas (`CLUSTER SLOTS` leaves out failed ones), so right after a
 * failover a promoted master can show none while its old master and the other replicas reattach. The
 * most replicas ever seen for a slot are kept as the route's `knownReplicas`: a write there then
 * waits for them (retryable) instead of failing with `NO_REPLICAS`, which only a Cluster that never
 * showed a replica for the slot gets.
 */
export const slotMapTopology = (
  slots: SlotMap,
  description: string,
  subscriber: (() => Promise<Subscriber>) | undefined
): Topology => {
  const knownReplicas = new Uint8Array(slotCount)
  return {
    description,
    publish: "SPUBLISH",
    subscriber,
    route: (key) => {
      const slot = slotOf(key)
      const shard = slots.shard(slot)
      if (shard === undefined) return Result.fail(unserved(key, slot))
      const replicas = shard.replicas
      if (replicas !== undefined && replicas > knownReplicas[slot]!) knownReplicas[slot] = Math.min(255, replicas)
      return Result.succeed({ address: shard.master, replicas, knownReplicas: knownReplicas[slot] })
    },
    isMaster: (key, address) => slots.shard(slotOf(key))?.master === address,
    // Only after an ASK, so a scan of the slot map is cheap enough. A master that serves no slot yet
    // (a new node a slot is migrating to) is not in it: undefined, and its own replica list counts.
    routeAt: (address) => {
      for (let slot = 0; slot < slotCount; slot++) {
        const shard = slots.shard(slot)
        if (shard?.master === address) return { address, replicas: shard.replicas }
      }
      return undefined
    },
    // In the background: the caller's own time limit must not wait for it (a command written to a
    // frozen node never answers, and a client's own timeout may only drop unwritten commands).
    refresh: (key) => Effect.asVoid(Effect.forkDetach(reread(slots, key, 1_000))),
    reread: (key, timeoutMillis) => reread(slots, key, timeoutMillis)
  }
}

/** `SlotMap.reread`, waiting at most `timeoutMillis` (and at most a second). */
const reread = (slots: SlotMap, key: string, timeoutMillis: number): Effect.Effect<void> => {
  // Whole milliseconds: node-redis throws a RangeError from its timer on a fraction.
  const timeout = Math.min(1_000, Math.floor(timeoutMillis))
  return timeout < 1
    ? Effect.void
    : Effect.tryPromise(() => slots.reread(key, timeout)).pipe(Effect.timeoutOption(timeout), Effect.ignore)
}
