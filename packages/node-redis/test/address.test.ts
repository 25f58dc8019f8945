// Address parsing for the Config layers and the Sentinel options: a malformed address must be an
// `InvalidArgument` when the layer is built, before any connection is tried.
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Address from "../src/internal/connection/address.ts"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

describe("addresses", () => {
  it("parses host:port and [v6]:port", () => {
    assert.deepStrictEqual(Address.parse("10.0.0.5:26379"), Result.succeed({ host: "10.0.0.5", port: 26379 }))
    assert.deepStrictEqual(Address.parse(" sentinel-a:1 "), Result.succeed({ host: "sentinel-a", port: 1 }))
    assert.deepStrictEqual(Address.parse("[::1]:6379"), Result.succeed({ host: "::1", port: 6379 }))
  })

  it("refuses addresses without a usable port or host", () => {
    for (const bad of ["10.0.0.5", "10.0.0.5:", ":6379", "host:0", "host:65536", "host:63x", "::1:6379", "a b:1"]) {
      assert.isTrue(Result.isFailure(Address.parse(bad)), bad)
    }
  })

  it.effect("layerSentinelConfig: an address without a port is InvalidArgument naming sentinels", () =>
    Effect.gen(function* () {
      const env = ConfigProvider.fromUnknown({ SENTINELS: "10.0.0.5:26379,10.0.0.6", NAME: "mymaster" })
      const error = yield* Effect.flip(
        Layer.build(
          NodeRedisBackend.layerSentinelConfig({ name: Config.String("NAME"), sentinels: Config.String("SENTINELS") })
        )
      ).pipe(Effect.provide(ConfigProvider.layer(env)))
      assert.strictEqual(error._tag, "InvalidArgument")
      if (error._tag === "InvalidArgument") {
        assert.strictEqual(error.field, "sentinels")
        assert.include(error.reason, "10.0.0.6")
      }
    })
  )

  it.effect("makeSentinel and layerClusterConfig refuse bad ports and URLs", () =>
    Effect.gen(function* () {
      const sentinel = yield* Effect.flip(
        Effect.scoped(NodeRedisBackend.makeSentinel({ name: "m", sentinels: [{ host: "10.0.0.5", port: Number.NaN }] }))
      )
      assert.strictEqual(sentinel._tag, "InvalidArgument")
      const env = ConfigProvider.fromUnknown({ NODES: "redis://10.0.0.7:7000,10.0.0.8:7000" })
      const cluster = yield* Effect.flip(
        Layer.build(NodeRedisBackend.layerClusterConfig({ nodes: Config.String("NODES") }))
      ).pipe(Effect.provide(ConfigProvider.layer(env)))
      assert.strictEqual(cluster._tag, "InvalidArgument")
      if (cluster._tag === "InvalidArgument") assert.strictEqual(cluster.field, "nodes")
    })
  )

  it("redactCredentials hides every password, whatever surrounds it, and keeps the rest", () => {
    assert.strictEqual(Address.redactCredentials("redis://u:pw@h:1/0"), "redis://u:***@h:1/0")
    assert.strictEqual(Address.redactCredentials("rediss://:pw@h:1"), "rediss://:***@h:1")
    assert.strictEqual(
      Address.redactCredentials('redis://a:x@h:1,"http://b:p@ss:w@h:2" u:y@10.0.0.5:26379'),
      'redis://a:***@h:1,"http://b:***@h:2" u:***@10.0.0.5:26379'
    )
    assert.strictEqual(Address.redactCredentials("redis://h:1 10.0.0.5:26379"), "redis://h:1 10.0.0.5:26379")
    assert.strictEqual(Address.redactCredentials("redis://user@h:1"), "redis://user@h:1")
    // Characters a password holds unencoded (which makes the URL invalid, so it reaches an error).
    for (const password of ["pa/ss", "pa#ss", "pa?ss", "pa,ss", "p@ss:w/rd"]) {
      const url = `redis://u:${password}S3cret@h:1`
      assert.strictEqual(Address.redactCredentials(url), "redis://u:***@h:1", password)
      assert.strictEqual(
        Address.redactCredentials(JSON.stringify([{ url }])),
        '[{"url":"redis://u:***@h:1"}]',
        `${password} in JSON`
      )
    }
    assert.strictEqual(
      Address.redactCredentials("redis://a:x@h:1,redis://b:y@h:2"),
      "redis://a:***@h:1,redis://b:***@h:2",
      "two URLs in one entry keep their hosts"
    )
  })

  it("withoutBracketedUrl turns a bracketed IPv6 URL into options node-redis can connect with", () => {
    assert.deepStrictEqual(
      Address.withoutBracketedUrl({
        url: "rediss://u%40x:p%2Fw@[::1]:7000/3",
        socket: { connectTimeout: 5 }
      }) as unknown,
      {
        username: "u@x",
        password: "p/w",
        database: 3,
        socket: { connectTimeout: 5, host: "::1", port: 7000, tls: true }
      }
    )
    assert.deepStrictEqual(Address.withoutBracketedUrl({ url: "redis://[fe80::1]" }) as unknown, {
      socket: { host: "fe80::1", port: 6379 }
    })
    const plain = { url: "redis://127.0.0.1:6379" }
    assert.strictEqual(Address.withoutBracketedUrl(plain), plain, "any other URL is left to node-redis")
  })

  it("redactUrl hides everything before a URL's last @, spaces included", () => {
    assert.strictEqual(Address.redactUrl("redis://u:pa ss,w/rd@h:99999"), "redis://***@h:99999")
    assert.strictEqual(Address.redactUrl("u:pw@h:1"), "***@h:1")
    assert.strictEqual(Address.redactUrl("redis://h:1/0"), "redis://h:1/0")
  })

  it("checkRedisUrl refuses what node-redis would throw on", () => {
    assert.isUndefined(Address.checkRedisUrl("redis://u:p@127.0.0.1:6379/2"))
    assert.isUndefined(Address.checkRedisUrl("rediss://host"))
    for (const bad of ["redis://h:notaport", "http://h:1", "redis://[::1:6379", "redis://h:1/db", "nonsense", 7]) {
      assert.isDefined(Address.checkRedisUrl(bad), String(bad))
    }
  })
})
