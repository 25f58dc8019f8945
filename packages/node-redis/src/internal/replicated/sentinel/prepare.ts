// The Sentinel backends as the public constructors build them: the options checked before any I/O,
// and the connect they describe (the sentinels, the dedicated pool, the replicated backend), or the
// backend over a Sentinel client the application shares.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend } from "@sage/lock/LockBackend"
import type { InvalidArgument } from "@sage/lock/LockError"
import type { RedisClientOptions } from "redis"
import type * as Address from "../../connection/address.ts"
import type { Connect } from "../../connection/connecting.ts"
import { checkClientOptions, checkSentinels, type Common, unusableClient, validate } from "../../options/validate.ts"
import { nodeRedisDialer } from "../../pool/nodeRedisDialer.ts"
import * as Pool from "../../pool/pool.ts"
import { makeBackend } from "../backend.ts"
import { nodeRedisLinks } from "./nodeRedisLinks.ts"
import * as SentinelTopology from "./sentinel.ts"
import * as SharedSentinelTopology from "./sharedSentinel.ts"

/** The Sentinel options (`NodeRedisBackend.SentinelOptions`), as read here. */
export interface SentinelLayerOptions extends Common {
  readonly name: string
  readonly sentinels: ReadonlyArray<Address.HostPort>
  readonly sentinelClientOptions?: RedisClientOptions | undefined
  /** Options for the connections to the master (auth, TLS). */
  readonly nodeClientOptions?: RedisClientOptions | undefined
}

/** The Sentinel options checked (no I/O), and the connect they describe. */
export const prepareSentinel = (options: SentinelLayerOptions): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const { connectTimeout, maxConnections } = yield* validate(options)
    yield* checkSentinels(options.name, options.sentinels)
    yield* checkClientOptions("nodeClientOptions", options.nodeClientOptions)
    yield* checkClientOptions("sentinelClientOptions", options.sentinelClientOptions)
    return Effect.gen(function* () {
      const topology = yield* SentinelTopology.connect(
        {
          name: options.name,
          sentinels: options.sentinels.map(({ host, port }) => ({ host, port })),
          links: nodeRedisLinks(options.sentinelClientOptions, options.nodeClientOptions),
          description: "node-redis sentinel"
        },
        connectTimeout
      )
      const pool = yield* Pool.make({
        maxConnections,
        dialer: nodeRedisDialer(options.nodeClientOptions ?? {}),
        sharedLanes: SentinelTopology.sharedLanes
      })
      return yield* makeBackend(topology, pool, undefined, SentinelTopology.backendOptions)
    })
  })

/** The Sentinel backend over a Sentinel client the application shares (`NodeRedisBackend.fromSentinel`). */
export const fromSharedSentinel = (
  sentinel: SharedSentinelTopology.SentinelClient,
  options: Common & { readonly nodeClientOptions?: RedisClientOptions | undefined }
): Effect.Effect<Backend, InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    const { maxConnections } = yield* validate(options)
    const unusable = unusableClient("sentinel", sentinel, {
      methods: ["getMasterNode", "getReplicaNodes", "subscribe", "unsubscribe"],
      what: "Sentinel client (createSentinel)"
    })
    if (unusable !== undefined) return yield* unusable
    const pool = yield* Pool.make({
      maxConnections,
      dialer: nodeRedisDialer(options.nodeClientOptions ?? {}),
      sharedLanes: SentinelTopology.sharedLanes
    })
    return yield* makeBackend(SharedSentinelTopology.topology(sentinel), pool, undefined, {
      ...SentinelTopology.backendOptions,
      sharedSubscriber: true
    })
  })
