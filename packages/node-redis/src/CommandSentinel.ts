/**
 * The Sentinel backend over any Redis client library: give it a way to open a connection to a
 * sentinel, one to a data node (the pool's), and optionally a subscriber connection, and it runs the
 * lock's, the semaphore's and the election's scripts on the master the sentinels name exactly as the
 * node-redis backend's `makeSentinel` does.
 *
 * **Details**
 * - The view: every sentinel is asked at once (`SENTINEL MASTER`, `SENTINEL REPLICAS`, `SENTINEL
 *   SENTINELS`, each bounded to a second), every second and at once when an operation meets a
 *   stale view; the newest configuration epoch wins, and sentinels the others report are asked too.
 *   Replicas are only counted, never connected to.
 * - Each operation goes to the master on a connection of the backend's own pool (`dial`): the
 *   script and `ROLE` in one round trip, then, with replica acknowledgement on, a `WAIT` on that
 *   same connection for the replicas the sentinels count as healthy.
 * - Wake-ups: one `subscriber` connection to the master, moved to the new master after a failover
 *   (without it, waiters poll with backoff).
 * - Failures: `classify` reads the client's errors, as in `CommandBackend`.
 *
 * This module does not load node-redis: `@sage/lock-ioredis` builds its Sentinel backend on it.
 *
 * @since 0.2.1
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as LockBackend from "@sage/lock/LockBackend"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { type Classify, classifyByShape } from "./CommandBackend.ts"
import type { DialedConnection } from "./CommandCluster.ts"
import { checkSentinels, invalid } from "./internal/options/validate.ts"
import { dialedConnections } from "./internal/pool/dialed.ts"
import * as Pool from "./internal/pool/pool.ts"
import { makeBackend } from "./internal/replicated/backend.ts"
import type { SentinelLink, SubscriberLink } from "./internal/replicated/sentinel/links.ts"
import * as SentinelTopology from "./internal/replicated/sentinel/sentinel.ts"

/**
 * A connection to one sentinel. It connects, and reconnects, by itself in the background, and
 * refuses a command at once while disconnected (another sentinel answers the question).
 *
 * @category models
 * @since 0.2.1
 */
export interface SentinelConnection {
  /** Sends one command (name first, all text); resolves with the reply as `CommandBackend.Connection` says. */
  readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
  /** Closes it at once, whatever state it is in. */
  readonly destroy: () => void
}

/**
 * A connection to the master for wake-ups. It reconnects by itself and subscribes its channels
 * again when it does.
 *
 * @category models
 * @since 0.2.1
 */
export interface SubscriberConnection {
  /** Connected, and not closed since (a silent one is then asked `PING`). */
  readonly isReady: boolean
  readonly connect: () => Promise<unknown>
  /** Sends one command (`PING`, to check a connection that delivered nothing for a while). */
  readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
  readonly subscribe: (channel: string, listener: (message: string) => void) => Promise<unknown>
  readonly unsubscribe: (channel: string) => Promise<unknown>
  /** Closes it at once, whatever state it is in. */
  readonly destroy: () => void
}

type Node = { readonly host: string; readonly port: number }

/**
 * Options of `make`.
 *
 * @category options
 * @since 0.2.1
 */
export interface Options {
  /** What the backend is, for logs and spans (e.g. `"ioredis sentinel"`). */
  readonly description: string
  /** The master's name, as the sentinels monitor it. */
  readonly name: string
  /** The sentinels to ask first (others they report are asked too, up to 16 in all). */
  readonly sentinels: ReadonlyArray<Node>
  /** Opens a connection to a sentinel (connecting in the background). */
  readonly sentinel: (node: Node) => SentinelConnection
  /** Opens (without connecting it) a plain connection to a data node, for the backend's pool. */
  readonly dial: (node: Node) => DialedConnection
  /** Opens (without connecting it) a subscriber connection to a data node, for wake-ups. */
  readonly subscriber?: ((node: Node) => SubscriberConnection) | undefined
  /** Connections to the master at most (an integer of at least 1; default 10). */
  readonly maxConnections?: number | undefined
  /** How long `make` waits for the sentinels to name a master (milliseconds; default 10 seconds). */
  readonly connectTimeoutMillis?: number | undefined
  /** Reads the client's failures. Default: `CommandBackend.classifyByShape`. */
  readonly classify?: Classify | undefined
}

type Linked<A> = A & { readonly link: { readonly destroy: () => void } }

const sentinelLink = (connection: SentinelConnection): Linked<SentinelLink> => ({
  link: connection,
  sendCommand: (args) => connection.send(args)
})

const subscriberLink = (connection: SubscriberConnection): Linked<SubscriberLink> => ({
  link: connection,
  get isReady() {
    return connection.isReady
  },
  connect: () => connection.connect(),
  sendCommand: (args) => connection.send(args),
  subscribe: (channel, listener) => connection.subscribe(channel, listener),
  unsubscribe: (channel) => connection.unsubscribe(channel)
})

const checkOptions = (options: Options): Effect.Effect<void, InvalidArgument> =>
  Effect.gen(function* () {
    if (typeof options !== "object" || options === null) return yield* invalid("options", options, "must be an object")
    yield* checkSentinels(options.name, options.sentinels)
    for (const field of ["sentinel", "dial"] as const) {
      if (typeof options[field] !== "function") return yield* invalid(field, options[field], "must be a function")
    }
    if (options.subscriber !== undefined && typeof options.subscriber !== "function") {
      return yield* invalid("subscriber", options.subscriber, "must be a function")
    }
    const maxConnections = options.maxConnections ?? 10
    if (!Number.isInteger(maxConnections) || maxConnections < 1) {
      return yield* invalid("maxConnections", maxConnections, "must be an integer of at least 1")
    }
    const connectTimeout = options.connectTimeoutMillis ?? 10_000
    if (typeof connectTimeout !== "number" || !(connectTimeout > 0) || !Number.isFinite(connectTimeout)) {
      return yield* invalid("connectTimeoutMillis", connectTimeout, "must be a positive number of milliseconds")
    }
  })

/**
 * The Sentinel backend: the sentinels' view of the master, a pool of connections to it, and
 * wake-ups on a subscriber connection, all closed with the scope. Fails with `InvalidArgument` when
 * an option is not of the kind described, or when the sentinels that answer monitor no master
 * called `name`; with `LockRedisError` when no master is named within `connectTimeoutMillis`.
 *
 * @category constructors
 * @since 0.2.1
 */
export const make = (
  options: Options
): Effect.Effect<LockBackend.Backend, InvalidArgument | LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* checkOptions(options)
    const classify = options.classify ?? classifyByShape
    const subscriber = options.subscriber
    const topology = yield* SentinelTopology.connect(
      {
        name: options.name,
        sentinels: options.sentinels.map(({ host, port }) => ({ host, port })),
        description: String(options.description),
        links: {
          sentinel: (node) => sentinelLink(options.sentinel(node)),
          subscriber: subscriber === undefined ? undefined : (node) => subscriberLink(subscriber(node)),
          destroy: (link) => (link as Linked<SentinelLink | SubscriberLink>).link.destroy(),
          classify
        }
      },
      options.connectTimeoutMillis ?? 10_000
    )
    const pool = yield* Pool.make({
      maxConnections: options.maxConnections ?? 10,
      dialer: dialedConnections(options.dial, classify),
      sharedLanes: SentinelTopology.sharedLanes
    })
    return yield* makeBackend(topology, pool, undefined, SentinelTopology.backendOptions)
  })
