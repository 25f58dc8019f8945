// Service wiring and option validation that need no server: layers, Config, and the accessors.
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Lock from "../src/Lock.ts"
import { scripted } from "./fakeBackend.ts"

describe("Lock layers", () => {
  it.effect("layer validates options when built", () =>
    Effect.gen(function* () {
      const fake = scripted({})
      const error = yield* Effect.flip(
        Layer.build(Lock.layer({ leaseDuration: "10 millis" }).pipe(Layer.provide(fake.layer)))
      )
      assert.strictEqual(error.field, "leaseDuration")
      assert.include(error.message, "30 ms")
    })
  )

  it.effect("a lease too long to count in whole milliseconds is InvalidArgument, not a server error later", () =>
    Effect.gen(function* () {
      const fake = scripted({})
      const error = yield* Effect.flip(
        Layer.build(Lock.layer({ leaseDuration: Duration.millis(1e19) }).pipe(Layer.provide(fake.layer)))
      )
      assert.strictEqual(error._tag, "InvalidArgument")
      assert.strictEqual(error.field, "leaseDuration")
      assert.include(error.message, "at most")
      assert.lengthOf(fake.calls.acquire, 0)
    })
  )

  it.effect("layerConfig reads options from Config and the accessors use the service", () =>
    Effect.gen(function* () {
      const fake = scripted({})
      const live = Lock.layerConfig({
        namespace: Config.String("LOCK_NAMESPACE"),
        leaseDuration: Config.Duration("LOCK_LEASE")
      }).pipe(Layer.provide(fake.layer))
      const program = Effect.gen(function* () {
        const lock = yield* Lock.Lock
        assert.strictEqual(lock.namespace, "billing")
        assert.isTrue(Duration.equals(lock.leaseDuration, Duration.seconds(7)))
        const value = yield* Lock.withLock("k", { waitTimeout: "1 second" })(Effect.succeed(1))
        const maybe = yield* Lock.tryWithLock("k")(Effect.succeed(2))
        return [value, maybe] as const
      })
      const [value, maybe] = yield* program.pipe(
        Effect.provide(live),
        Effect.provide(
          ConfigProvider.layer(ConfigProvider.fromUnknown({ LOCK_NAMESPACE: "billing", LOCK_LEASE: "7 seconds" }))
        )
      )
      assert.strictEqual(value, 1)
      assert.deepStrictEqual(maybe, Option.some(2))
      assert.strictEqual(fake.calls.acquire[0]?.key, "billing:{k}")
      assert.strictEqual(fake.calls.acquire[0]?.leaseMillis, 7000)
    })
  )

  it.effect("a bad Config value fails the layer with ConfigError", () =>
    Effect.gen(function* () {
      const fake = scripted({})
      const live = Lock.layerConfig({ leaseDuration: Config.Duration("LOCK_LEASE") }).pipe(Layer.provide(fake.layer))
      const error = yield* Effect.flip(Layer.build(live)).pipe(
        Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({ LOCK_LEASE: "soon" })))
      )
      assert.strictEqual(error._tag, "ConfigError")
    })
  )
})
