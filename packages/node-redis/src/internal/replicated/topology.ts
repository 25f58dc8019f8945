// What a replicated deployment (Sentinel, Cluster) tells the lock about its topology: where each
// key's master is, whether a node still is one, how to re-read the view, and how wake-ups travel.
// The backend (backend.ts) and the modules beside it read these types; the deployments (sentinel/,
// cluster/) provide them.
import type * as Effect from "effect/Effect"
import type * as Result from "effect/Result"
import type { LockRedisError } from "@sage/lock/LockError"
import type * as Scripts from "../scripts.ts"
import type { Subscriber } from "../wakeups/subscriber.ts"

/**
 * Where a key's master is, and how many replicas the client's view lists for it (undefined: the
 * client keeps no replica list, so the master's own list counts).
 */
export interface Route {
  readonly address: string
  readonly replicas: number | undefined
  /**
   * How many replicas the view knows for the master whatever their health (the sentinels list a
   * replica that is reattaching after a failover, or down, as well). When the master and the view
   * have no healthy replica but this is above 0, the deployment has replicas that are not back yet:
   * a write waits for them (retryable) instead of failing with `NO_REPLICAS`. Undefined: not known.
   */
  readonly knownReplicas?: number | undefined
  /**
   * Asks the view whether a replica left the master (`ROLE` lists it no more) while the view still
   * vouches for it, and answers its address. A master that lost a replica to a promotion still
   * lists the others, and their acknowledgement alone would confirm a write the promoted replica
   * never gets: such a write must not count. Only views that track each replica's health (the
   * sentinels) can tell a departure from a death; without it, the master's own list is believed.
   */
  readonly departed?: ((master: string, role: unknown) => Effect.Effect<string | undefined>) | undefined
}

/** What a replicated deployment tells the lock about its topology. */
export interface Topology {
  readonly description: string
  /** Where `key`'s master is in the client's current view (a plain look-up: no I/O). */
  readonly route: (key: string) => Result.Result<Route, LockRedisError>
  /** Whether `address` is the master for `key` in the client's current view. */
  readonly isMaster: (key: string, address: string) => boolean
  /** Asks the client to re-read the topology after a redirect, a role change or a dead node. */
  readonly refresh: (key: string) => Effect.Effect<void>
  /**
   * Re-reads the view after a `MOVED` and waits for it, at most `timeoutMillis` (Cluster only): a
   * slot that moved is then tried once more on its new master within the same call.
   */
  readonly reread?: ((key: string, timeoutMillis: number) => Effect.Effect<void>) | undefined
  /**
   * The route of the master at `address`, when the view knows it as one (Cluster: the node an `ASK`
   * names, which takes the write and whose replicas must acknowledge it). Without it, or for a node
   * the view does not know (an empty master a slot is migrating to), the master's own list counts.
   */
  readonly routeAt?: ((address: string) => Route | undefined) | undefined
  /** How releases wake waiters: `SPUBLISH` on Cluster (the message stays on the key's shard). */
  readonly publish: Scripts.Publish
  /**
   * The subscriber for wake-ups: the topology client's own pub/sub, which follows failovers. Without
   * one, waiters poll.
   */
  readonly subscriber?: (() => Promise<Subscriber>) | undefined
}
