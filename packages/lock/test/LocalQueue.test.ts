// In-process turns: fibers of one client queue per key in arrival order, the wait counts against
// waitTimeout, and tryWithLock never waits for another fiber of the same client.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { TestClock } from "effect/testing"
import * as Lock from "../src/Lock.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"
import { scripted } from "./fakeBackend.ts"

describe("in-process turns", () => {
  it.effect("fibers waiting for one key enter in arrival order", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ leaseDuration: "1 second" })
      const order: Array<number> = []
      const inside = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Effect.sleep("500 millis")),
          lock.withLock("k", { waitTimeout: "1 second" })
        )
      )
      yield* Deferred.await(inside)
      const waiters: Array<Fiber.Fiber<void, unknown>> = []
      for (const n of [1, 2, 3, 4]) {
        waiters.push(
          yield* Effect.forkChild(
            Effect.sync(() => order.push(n)).pipe(
              Effect.andThen(Effect.sleep("10 millis")),
              lock.withLock("k", { waitTimeout: "10 seconds" })
            )
          )
        )
        yield* TestClock.adjust("1 millis")
      }
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(holder)
      for (const waiter of waiters) yield* Fiber.join(waiter)
      assert.deepStrictEqual(order, [1, 2, 3, 4])
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("the wait for a turn counts against waitTimeout; tryWithLock does not wait or call the server", () =>
    Effect.gen(function* () {
      const fake = scripted({})
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      const inside = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Effect.sleep("5 seconds")),
          lock.withLock("k", { waitTimeout: "1 second" })
        )
      )
      yield* Deferred.await(inside)
      const calls = fake.calls.acquire.length
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)), "busy inside this client")
      assert.strictEqual(fake.calls.acquire.length, calls, "decided without the server")
      const waiter = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "2 seconds" })(Effect.void)))
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(waiter.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const error = yield* Fiber.join(waiter)
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") {
        assert.strictEqual(error.waitedMillis, 2000)
        assert.strictEqual(error.reason, "busy")
      }
      yield* TestClock.adjust("5 seconds")
      yield* Fiber.join(holder)
    })
  )
})
