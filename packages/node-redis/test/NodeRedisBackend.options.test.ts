// Options the layers cannot use fail with InvalidArgument naming the field, before any connection:
// never a thrown error from node-redis (whose messages carry the URL, password included), never a
// silent fallback to 127.0.0.1:6379, never a timer that Node fires at once.
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { Faults } from "@sage/lock-testkit"
import { Lock } from "@sage/lock"
import type { LockBackend } from "@sage/lock/LockBackend"
import { createClient } from "redis"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

const refusedAs = (layer: Layer.Layer<LockBackend, unknown>) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(Effect.scoped(Layer.build(layer)))
    assert.isTrue(Exit.isFailure(exit), "the layer was built")
    const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
    assert.strictEqual((error as { _tag?: string })._tag, "InvalidArgument", String(error))
    return (error as { field: string }).field
  })

const sentinel = (extra: object) =>
  NodeRedisBackend.layerSentinel({
    name: "mymaster",
    sentinels: [{ host: "127.0.0.1", port: 1 }],
    ...extra
  } as never)

const cluster = (extra: object) =>
  NodeRedisBackend.layerCluster({ rootNodes: [{ url: "redis://127.0.0.1:1" }], ...extra } as never)

describe("NodeRedisBackend options", () => {
  it.live("options that are not an options object", () =>
    Effect.gen(function* () {
      for (const options of [null, "redis://127.0.0.1:6379", 42, []]) {
        assert.strictEqual(yield* refusedAs(NodeRedisBackend.layer(options as never)), "options", String(options))
      }
      assert.strictEqual(yield* refusedAs(NodeRedisBackend.layerSentinel(null as never)), "options")
      assert.strictEqual(yield* refusedAs(NodeRedisBackend.layerCluster(undefined as never)), "options")
    })
  )

  it.live("a connect timeout Node's timers cannot keep, and a pool that is not an object", () =>
    Effect.gen(function* () {
      for (const connectTimeoutMillis of [2 ** 31, 1e20, Number.NaN, "10" as never]) {
        const field = yield* refusedAs(NodeRedisBackend.layer({ url: "redis://127.0.0.1:1", connectTimeoutMillis }))
        assert.strictEqual(field, "connectTimeoutMillis", String(connectTimeoutMillis))
      }
      for (const dedicatedPool of [5, "x", null]) {
        const field = yield* refusedAs(cluster({ dedicatedPool }))
        assert.strictEqual(field, "dedicatedPool", String(dedicatedPool))
      }
    })
  )

  it.live("socket options that would connect somewhere else than meant", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* refusedAs(NodeRedisBackend.layer({ socket: "abc" as never })), "options.socket")
      assert.strictEqual(yield* refusedAs(NodeRedisBackend.layer({ socket: { host: "" } })), "options.socket.host")
      assert.strictEqual(
        yield* refusedAs(NodeRedisBackend.layer({ socket: { host: "127.0.0.1", port: 99_999 } })),
        "options.socket.port"
      )
      assert.strictEqual(
        yield* refusedAs(sentinel({ nodeClientOptions: { socket: { host: "" } } })),
        "nodeClientOptions.socket.host"
      )
      assert.strictEqual(yield* refusedAs(sentinel({ sentinelClientOptions: 7 })), "sentinelClientOptions")
      assert.strictEqual(yield* refusedAs(NodeRedisBackend.layer({ password: 42 as never })), "password")
      assert.strictEqual(
        yield* refusedAs(sentinel({ nodeClientOptions: { username: ["u"] as never } })),
        "nodeClientOptions.username"
      )
      for (const database of [-1, 1.5, "0"]) {
        assert.strictEqual(yield* refusedAs(NodeRedisBackend.layer({ database: database as never })), "database")
      }
      assert.strictEqual(yield* refusedAs(cluster({ defaults: { url: "nonsense" } })), "defaults.url")
      for (const rootNodes of [[{}], [null], [{ socket: { host: "" } }]]) {
        const field = yield* refusedAs(NodeRedisBackend.layerCluster({ rootNodes } as never))
        assert.include(field, "rootNodes", JSON.stringify(rootNodes))
      }
      // A bigint port cannot be shown with JSON.stringify: the refusal must still be a typed error.
      const bigintPort = yield* refusedAs(
        NodeRedisBackend.layerSentinel({ name: "m", sentinels: [{ host: "127.0.0.1", port: 1n as never }] })
      )
      assert.strictEqual(bigintPort, "sentinels")
    })
  )

  it.live("a shared client that is not one, or is not connected", () =>
    Effect.gen(function* () {
      for (const client of [null, undefined, {}, { sendCommand: () => {} }]) {
        assert.strictEqual(yield* refusedAs(NodeRedisBackend.layerFromClient(client as never)), "client")
      }
      // Never connected: every lock call would fail with "The client is closed".
      const unconnected = createClient({ url: "redis://127.0.0.1:1" })
      assert.strictEqual(yield* refusedAs(NodeRedisBackend.layerFromClient(unconnected)), "client")
    })
  )

  it.live("a shared Sentinel or Cluster client that is not one", () =>
    Effect.gen(function* () {
      for (const client of [null, {}, { isOpen: true }]) {
        assert.strictEqual(yield* refusedAs(NodeRedisBackend.layerFromSentinel(client as never)), "sentinel")
        assert.strictEqual(yield* refusedAs(NodeRedisBackend.layerFromCluster(client as never)), "cluster")
      }
    })
  )

  it.live("a bad lock option is reported at once while the server does not answer, on every layer", () =>
    Effect.gen(function* () {
      // Accepts connections and never answers: a connect waits for its whole timeout.
      const port = yield* Faults.silentPeer
      const connectTimeoutMillis = 10_000
      const backends: ReadonlyArray<readonly [string, Layer.Layer<LockBackend, unknown>]> = [
        ["standalone", NodeRedisBackend.layer({ url: `redis://127.0.0.1:${port}`, connectTimeoutMillis })],
        [
          "sentinel",
          NodeRedisBackend.layerSentinel({
            name: "mymaster",
            sentinels: [{ host: "127.0.0.1", port }],
            connectTimeoutMillis
          })
        ],
        [
          "cluster",
          NodeRedisBackend.layerCluster({ rootNodes: [{ url: `redis://127.0.0.1:${port}` }], connectTimeoutMillis })
        ]
      ]
      for (const [name, backend] of backends) {
        const startedAt = performance.now()
        const exit = yield* Effect.exit(
          Effect.scoped(Layer.build(Lock.layer({ leaseDuration: "10 secs" as never }).pipe(Layer.provide(backend))))
        )
        const took = performance.now() - startedAt
        const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
        assert.strictEqual((error as { _tag?: string })._tag, "InvalidArgument", `${name}: ${String(error)}`)
        assert.strictEqual((error as { field?: string }).field, "leaseDuration", name)
        // Within milliseconds where the connect would take its 10 s: the layer is torn down, its
        // connect interrupted, in the same breath.
        assert.isBelow(took, 2_000, `${name}: reported after ${Math.round(took)} ms`)
      }
    })
  )
})
