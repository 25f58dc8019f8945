// Service wiring and option validation that need no server: layers, Config, and the accessors.
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as KeyCodec from "../src/KeyCodec.ts"
import * as Lock from "../src/Lock.ts"
import { scripted } from "./fakeBackend.ts"

describe("Lock layers", () => {
  it.effect("layer validates options when built", () =>
    Effect.gen(function* () {
      const fake = scripted({})
      const error = yield* Effect.flip(
        Layer.build(Lock.layer({ leaseDuration: "10 millis" }).pipe(Layer.provide(fake.layer)))
      )
      assert(error._tag === "InvalidArgument", error.message)
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
      assert(error._tag === "InvalidArgument", error.message)
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

// What plain JavaScript (or a cast) can hand the client: each is InvalidArgument naming the field,
// never a crash, and nothing reaches the backend.
const makeWith = (options: unknown) => {
  const fake = scripted({})
  return { fake, make: Lock.make(options as never).pipe(Effect.provide(fake.layer)) }
}

const handBuilt = (encode: (key: string) => unknown) =>
  ({ [KeyCodec.TypeId]: KeyCodec.TypeId, name: "hand", encode }) as unknown as KeyCodec.KeyCodec<string>

describe("Lock options that are not what their types say", () => {
  it.effect("options and key codecs", () =>
    Effect.gen(function* () {
      for (const options of [null, "lock", 7, []]) {
        const error = yield* Effect.flip(makeWith(options).make)
        assert(error._tag === "InvalidArgument", error.message)
        assert.strictEqual(error.field, "options", String(options))
      }
      const throwingName = Object.defineProperty({ encode: () => Result.succeed("k") }, "name", {
        get: () => {
          throw new Error("no name")
        }
      })
      for (const keyCodec of [{}, { name: 1, encode: () => Result.succeed("k") }, { name: "n" }, throwingName]) {
        const error = yield* Effect.flip(makeWith({ keyCodec }).make)
        assert(error._tag === "InvalidArgument", error.message)
        assert.strictEqual(error.field, "keyCodec")
      }
      // NaN and the infinities are shown as such, not as JSON's null.
      const nan = yield* Effect.flip(makeWith({ leaseDuration: Number.NaN }).make)
      assert.include(nan.message, "NaN")
      assert.notInclude(nan.message, "null")
    })
  )

  it.effect("a call without its waitTimeout says it is required, without trying the lock", () =>
    Effect.gen(function* () {
      const fake = scripted({})
      const lock = yield* Lock.make().pipe(Effect.provide(fake.layer))
      for (const options of [undefined, {}, 5000]) {
        const error = yield* Effect.flip(lock.withLock("k", options as never)(Effect.void))
        assert.strictEqual(error._tag, "InvalidArgument")
        if (error._tag === "InvalidArgument") {
          assert.strictEqual(error.field, "waitTimeout")
          assert.include(error.message, "is required")
        }
      }
      assert.lengthOf(fake.calls.acquire, 0)
    })
  )

  it.effect("a codec that answers something other than a Result of non-empty text, or throws", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<readonly [(key: string) => unknown, string]> = [
        [(key) => key, "not a Result"],
        [() => undefined, "not a Result"],
        [() => Result.succeed(""), "non-empty string"],
        [() => Result.succeed(42), "non-empty string"],
        [() => Result.fail(42), "42"],
        [
          () => {
            throw new Error("boom")
          },
          "Error: boom"
        ]
      ]
      for (const [encode, says] of cases) {
        const { fake, make } = makeWith({ keyCodec: handBuilt(encode) })
        const lock = yield* make
        const error = yield* Effect.flip(lock.withLock("k", { waitTimeout: "1 second" })(Effect.void))
        assert.strictEqual(error._tag, "InvalidArgument")
        assert.strictEqual((error as { field?: string }).field, "key")
        assert.include(error.message, says)
        assert.lengthOf(fake.calls.acquire, 0, "nothing was sent")
      }
    })
  )

  it.effect("acquire's interruptOnLoss must be a boolean", () =>
    Effect.gen(function* () {
      const { fake, make } = makeWith({})
      const lock = yield* make
      const error = yield* Effect.flip(
        Effect.scoped(lock.acquire("k", { waitTimeout: "1 second", interruptOnLoss: "false" as never }))
      )
      assert.strictEqual((error as { field?: string }).field, "interruptOnLoss")
      assert.lengthOf(fake.calls.acquire, 0, "nothing was sent")
    })
  )
})
