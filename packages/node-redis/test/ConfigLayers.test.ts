// The Config twins of the replicated layers, read from a ConfigProvider the way an application reads
// REDIS_SENTINELS / REDIS_CLUSTER_NODES from its environment.
import { assert, describe, it } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Lock } from "@sage/lock"
import { ClusterTopology, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

describe(`Config layers on ${flavor}`, () => {
  it.live("layerSentinelConfig and layerClusterConfig build working backends from Config", () =>
    Effect.gen(function* () {
      const sentinel = yield* SentinelTopology.start({ flavor: flavor!, downAfterMillis: 8_000 })
      const cluster = yield* ClusterTopology.start({ flavor: flavor!, nodeTimeoutMillis: 8_000 })
      const env = ConfigProvider.fromUnknown({
        REDIS_SENTINELS: sentinel.sentinelNodes.map(({ host, port }) => `${host}:${port}`).join(","),
        REDIS_MASTER_NAME: sentinel.masterName,
        REDIS_CLUSTER_NODES: cluster.rootNodes.map(({ host, port }) => `redis://${host}:${port}`).join(", "),
        REDIS_POOL_MAX: "3"
      })
      const viaSentinel = NodeRedisBackend.layerSentinelConfig({
        name: Config.String("REDIS_MASTER_NAME"),
        sentinels: Config.String("REDIS_SENTINELS"),
        maxConnections: Config.Int("REDIS_POOL_MAX")
      })
      const viaCluster = NodeRedisBackend.layerClusterConfig({
        nodes: Config.String("REDIS_CLUSTER_NODES"),
        maxConnections: Config.Int("REDIS_POOL_MAX")
      })
      for (const backend of [viaSentinel, viaCluster]) {
        const value = yield* Lock.withLock("configured", { waitTimeout: "2 seconds" })(Effect.succeed("ok")).pipe(
          Effect.provide(Lock.layer({ namespace: "cfg" }).pipe(Layer.provide(backend))),
          Effect.provide(ConfigProvider.layer(env))
        )
        assert.strictEqual(value, "ok")
      }
      const missing = yield* Effect.flip(
        Layer.build(
          NodeRedisBackend.layerSentinelConfig({ name: Config.String("NOPE"), sentinels: Config.String("NOPE") })
        )
      ).pipe(Effect.provide(ConfigProvider.layer(env)))
      assert.strictEqual(missing._tag, "ConfigError")
    })
  )
})
