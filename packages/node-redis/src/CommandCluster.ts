/**
 * The Cluster backend over any Redis client that keeps a Cluster's slot map: give it the client's
 * view of the slots, a way to open plain connections to a node, and optionally sharded pub/sub for
 * wake-ups, and it runs the lock's, the semaphore's and the election's scripts on each key's master
 * exactly as the node-redis backend's `makeCluster` does.
 *
 * **Details**
 * - Each operation goes to its key's master (by the slot map) on a connection of the backend's own
 *   pool (`dial`): the script and `ROLE` in one round trip (a node that no longer calls itself master,
 *   or that the view no longer names, is not trusted), then, with replica acknowledgement on, a
 *   `WAIT` on that same connection. `MOVED` re-reads the view and tries the new master within the
 *   same call; `ASK` follows the slot to the node it is migrating to.
 * - The pool's connections never reconnect: a broken one is dropped and another is dialled. At most
 *   `maxConnections` per node; idle ones close after about a minute; all close with the scope.
 * - Wake-ups travel by `SPUBLISH` on the key's shard; `subscriber` must subscribe with `SSUBSCRIBE`
 *   and follow the slots as they move (without it, waiters poll with backoff).
 * - Failures: `classify` reads the client's errors, as in `CommandBackend`.
 *
 * This module does not load node-redis: `@sage/lock-ioredis` builds its Cluster backend on it.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { LockBackend } from "@sage/lock"
 * import * as CommandCluster from "@sage/lock-node-redis/CommandCluster"
 *
 * // A client that knows each slot's master and can open a connection to a node.
 * declare const client: {
 *   masterOf(slot: number): string | undefined
 *   refresh(): Promise<void>
 *   connectTo(host: string, port: number): CommandCluster.DialedConnection
 * }
 *
 * const BackendLive = Layer.effect(
 *   LockBackend.LockBackend,
 *   CommandCluster.make({
 *     description: "my cluster client",
 *     slots: {
 *       shard: (slot) => {
 *         const master = client.masterOf(slot)
 *         return master === undefined ? undefined : { master, replicas: undefined }
 *       },
 *       reread: () => client.refresh()
 *     },
 *     dial: ({ host, port }) => client.connectTo(host, port)
 *   })
 * )
 * ```
 *
 * @since 0.2.1
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as LockBackend from "@sage/lock/LockBackend"
import { InvalidArgument } from "@sage/lock/LockError"
import { type Classify, classifyByShape, type Subscriber } from "./CommandBackend.ts"
import { valueText } from "./internal/options/valueText.ts"
import { type DialedConnection, dialedConnections } from "./internal/pool/dialed.ts"
import * as Pool from "./internal/pool/pool.ts"
import { makeBackend } from "./internal/replicated/backend.ts"
import * as Slot from "./internal/replicated/cluster/slot.ts"
import { type SlotMap, slotMapTopology } from "./internal/replicated/cluster/slotMap.ts"
import { watchable } from "./internal/wakeups/watchable.ts"

export type { DialedConnection } from "./internal/pool/dialed.ts"
export type { Shard, SlotMap } from "./internal/replicated/cluster/slotMap.ts"

/**
 * The Cluster hash slot (0 to 16383) of a key or a sharded channel, as the server computes it: CRC16
 * of the part inside the first non-empty `{...}`, or of the whole name.
 *
 * @example
 * ```ts
 * import * as CommandCluster from "@sage/lock-node-redis/CommandCluster"
 *
 * CommandCluster.slotOf("billing:{invoice:42}") === CommandCluster.slotOf("{invoice:42}") // true
 * ```
 *
 * @category cluster
 * @since 0.2.1
 */
export const slotOf: (key: string) => number = Slot.slotOf

/**
 * Options of `make`.
 *
 * @category options
 * @since 0.2.1
 */
export interface Options {
  /** What the backend is, for logs and spans (e.g. `"ioredis cluster"`). */
  readonly description: string
  readonly slots: SlotMap
  /** Opens (without connecting it) a connection to the node at `host:port`. */
  readonly dial: (node: { readonly host: string; readonly port: number }) => DialedConnection
  /**
   * Where to connect for a node the slot map names, when that name is not reachable from here (a
   * Cluster behind NAT); `undefined` keeps the name's own host and port.
   */
  readonly resolve?: ((node: string) => { readonly host: string; readonly port: number } | undefined) | undefined
  /** Connections per node at most (an integer of at least 1; default 10). */
  readonly maxConnections?: number | undefined
  /**
   * Opens the sharded subscriber for wake-ups (`SSUBSCRIBE`), the first time a lock is waited for.
   * Without it waiters poll with backoff.
   */
  readonly subscriber?: (() => Promise<Subscriber>) | undefined
  /** Reads the client's failures. Default: `CommandBackend.classifyByShape`. */
  readonly classify?: Classify | undefined
}

const invalid = (field: string, value: unknown, reason: string) =>
  new InvalidArgument({ field, value: valueText(value), reason })

/**
 * The Cluster backend over a client's slot map and connections of its own pool, closed with the
 * scope. Fails with `InvalidArgument` when an option is not of the kind described.
 *
 * @category constructors
 * @since 0.2.1
 */
export const make = (options: Options): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    if (typeof options !== "object" || options === null) return yield* invalid("options", options, "must be an object")
    const { slots, dial, resolve, subscriber } = options
    if (typeof slots !== "object" || slots === null || typeof slots.shard !== "function") {
      return yield* invalid("slots", slots, "must have a shard function")
    }
    if (typeof slots.reread !== "function") return yield* invalid("slots.reread", slots.reread, "must be a function")
    if (typeof dial !== "function") return yield* invalid("dial", dial, "must be a function")
    if (resolve !== undefined && typeof resolve !== "function") {
      return yield* invalid("resolve", resolve, "must be a function")
    }
    if (subscriber !== undefined && typeof subscriber !== "function") {
      return yield* invalid("subscriber", subscriber, "must be a function")
    }
    const maxConnections = options.maxConnections ?? 10
    if (!Number.isInteger(maxConnections) || maxConnections < 1) {
      return yield* invalid("maxConnections", maxConnections, "must be an integer of at least 1")
    }
    const classify = options.classify ?? classifyByShape
    const pool = yield* Pool.make({
      maxConnections,
      resolve,
      dialer: dialedConnections(dial, classify)
    })
    const watched = subscriber === undefined ? undefined : () => subscriber().then(watchable)
    return yield* makeBackend(slotMapTopology(slots, String(options.description), watched), pool)
  })
