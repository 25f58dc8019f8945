// The Sentinel backends as the public constructors build them: the options checked before any I/O,
// and the connect they describe (the sentinels, the dedicated pool, the replicated backend), or the
// backend over a Sentinel client the application shares.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend } from "@sage/lock/LockBackend"
import type { InvalidArgument } from "@sage/lock/LockError"
import type { RedisClientOptions } from "redis"
import * as Address from "../../connection/address.ts"
import type { Connect } from "../../connection/connecting.ts"
import { checkClientOptions, type Common, invalid, unusableClient, validate } from "../../options/validate.ts"
import { nodeRedisDialer } from "../../pool/nodeRedisDialer.ts"
import * as Pool from "../../pool/pool.ts"
import { makeBackend } from "../backend.ts"
import * as SentinelTopology from "./sentinel.ts"
import * as SharedSentinelTopology from "./sharedSentinel.ts"

/**
 * Shared connections to a Sentinel master: every lock operation goes to that one server, so it gets
 * two, as the standalone layer does; a Cluster client keeps one per master (see `Pool.make`).
 */
const sentinelSharedLanes = 2

/**
 * A Sentinel master takes every acquisition, so acknowledged ones that come together are committed
 * as a group (one `ROLE` and one `WAIT` for several scripts); on Cluster batches per master stay
 * small and it did not pay (see `replicated/groupCommit/`).
 */
const sentinelOptions = { groupCommit: true } as const

/** The Sentinel options checked (no I/O), and the connect they describe. */
export const prepareSentinel = (
  options: SentinelTopology.SentinelOptions & Common
): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const { connectTimeout, maxConnections } = yield* validate(options)
    if (typeof options.name !== "string" || options.name.length === 0) {
      return yield* invalid("name", options.name, "the master name must be a non-empty string")
    }
    if (!Array.isArray(options.sentinels) || options.sentinels.length === 0) {
      return yield* invalid("sentinels", options.sentinels, "at least one sentinel is needed")
    }
    for (const node of options.sentinels) {
      const problem = Address.checkHost(node?.host) ?? Address.checkPort(node?.port)
      if (problem !== undefined) return yield* invalid("sentinels", node, problem)
    }
    yield* checkClientOptions("nodeClientOptions", options.nodeClientOptions)
    yield* checkClientOptions("sentinelClientOptions", options.sentinelClientOptions)
    return Effect.gen(function* () {
      const topology = yield* SentinelTopology.connect(
        {
          name: options.name,
          sentinels: options.sentinels.map(({ host, port }) => ({ host, port })),
          sentinelClientOptions: options.sentinelClientOptions,
          nodeClientOptions: options.nodeClientOptions
        },
        connectTimeout
      )
      const pool = yield* Pool.make({
        maxConnections,
        dialer: nodeRedisDialer(options.nodeClientOptions ?? {}),
        sharedLanes: sentinelSharedLanes
      })
      return yield* makeBackend(topology, pool, undefined, sentinelOptions)
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
      sharedLanes: sentinelSharedLanes
    })
    return yield* makeBackend(SharedSentinelTopology.topology(sentinel), pool, undefined, {
      ...sentinelOptions,
      sharedSubscriber: true
    })
  })
