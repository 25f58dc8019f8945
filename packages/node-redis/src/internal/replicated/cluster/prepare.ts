// The Cluster backends as the public constructors build them: the options checked before any I/O,
// and the connect they describe (the cluster client, the dedicated pool, the replicated backend), or
// the backend over a Cluster client the application shares.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend } from "@sage/lock/LockBackend"
import type { InvalidArgument } from "@sage/lock/LockError"
import type { RedisClientOptions, RedisClusterOptions } from "redis"
import * as Address from "../../connection/address.ts"
import type { Connect } from "../../connection/connecting.ts"
import { checkClientOptions, type Common, invalid, isRecord, unusableClient, validate } from "../../options/validate.ts"
import { nodeRedisDialer } from "../../pool/nodeRedisDialer.ts"
import * as Pool from "../../pool/pool.ts"
import { makeBackend } from "../backend.ts"
import * as ClusterTopology from "./cluster.ts"

/** The Cluster options (`NodeRedisBackend.ClusterOptions`), as read here. */
export interface ClusterLayerOptions extends Common {
  readonly rootNodes: RedisClusterOptions["rootNodes"]
  readonly defaults?: RedisClusterOptions["defaults"] | undefined
  readonly nodeAddressMap?: RedisClusterOptions["nodeAddressMap"] | undefined
}

/** A Cluster client the application shares (`NodeRedisBackend.SharedCluster`), as read here. */
export interface SharedClusterClient extends ClusterTopology.ClusterClient {
  readonly isOpen: boolean
  readonly _options?: { readonly defaults?: object | undefined; readonly nodeAddressMap?: unknown } | undefined
}

/** The Cluster options checked (no I/O), and the connect they describe. */
export const prepareCluster = (options: ClusterLayerOptions): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const { connectTimeout, maxConnections } = yield* validate(options)
    if (!Array.isArray(options.rootNodes) || options.rootNodes.length === 0) {
      return yield* invalid("rootNodes", options.rootNodes, "at least one node is needed")
    }
    for (const node of options.rootNodes) {
      if (!isRecord(node) || (node["url"] === undefined && node["socket"] === undefined)) {
        return yield* invalid("rootNodes", node, "each node needs a url or socket options")
      }
      yield* checkClientOptions("rootNodes", node)
    }
    yield* checkClientOptions("defaults", options.defaults)
    return Effect.gen(function* () {
      const cluster = yield* ClusterTopology.connect(
        {
          rootNodes: options.rootNodes.map((node) => Address.withoutBracketedUrl(node)),
          ...(options.defaults === undefined ? {} : { defaults: options.defaults }),
          ...(options.nodeAddressMap === undefined ? {} : { nodeAddressMap: options.nodeAddressMap })
        } as RedisClusterOptions,
        connectTimeout
      )
      const pool = yield* Pool.make({
        maxConnections,
        dialer: nodeRedisDialer((options.defaults ?? {}) as RedisClientOptions),
        resolve: ClusterTopology.addressMapper(options.nodeAddressMap)
      })
      return yield* makeBackend(
        ClusterTopology.topology(cluster, undefined, ClusterTopology.watchShardedPubSub(cluster)),
        pool
      )
    })
  })

/** The Cluster backend over a Cluster client the application shares (`NodeRedisBackend.fromCluster`). */
export const fromSharedCluster = (
  cluster: SharedClusterClient,
  options: Common & Omit<ClusterLayerOptions, "rootNodes">
): Effect.Effect<Backend, InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    const { maxConnections } = yield* validate(options)
    const unusable = unusableClient("cluster", cluster, {
      methods: ["sendCommand", "sSubscribe", "sUnsubscribe"],
      what: "Cluster client (createCluster)",
      also: Array.isArray((cluster as { readonly slots?: unknown } | null)?.slots)
    })
    if (unusable !== undefined) return yield* unusable
    const own = cluster._options
    const pool = yield* Pool.make({
      maxConnections,
      dialer: nodeRedisDialer((options.defaults ?? own?.defaults ?? {}) as RedisClientOptions),
      resolve: ClusterTopology.addressMapper(
        options.nodeAddressMap ?? (own?.nodeAddressMap as RedisClusterOptions["nodeAddressMap"])
      )
    })
    return yield* makeBackend(
      ClusterTopology.topology(cluster, "node-redis cluster (shared client)"),
      pool,
      undefined,
      { sharedSubscriber: true }
    )
  })
