// The in-memory backend under TestClock: the lock's behaviour without a server, with lease expiry
// driven by the test. (Evidence that the lock works across processes comes from the real-server
// contract suite; this shows the product backend keeps the same semantics.)
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { TestClock } from "effect/testing"
import * as Lock from "../src/Lock.ts"
import { LockBackend } from "../src/LockBackend.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"

describe("MemoryBackend", () => {
  it.effect("excludes, renews past the lease, and hands over on release", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ leaseDuration: "300 millis" })
      const inside = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Effect.sleep("2 seconds")),
          Effect.as("held for 2 s"),
          lock.withLock("k", { waitTimeout: "1 second" })
        )
      )
      yield* Deferred.await(inside)
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)), "busy while held")
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)), "still held: renewed past its lease")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(holder), "held for 2 s")
      assert.deepStrictEqual(yield* lock.tryWithLock("k")(Effect.succeed(1)), Option.some(1), "free after release")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("an abandoned lease expires after its duration", () =>
    Effect.gen(function* () {
      const backend = yield* LockBackend
      yield* backend.acquire({
        key: "lock:{k}",
        token: "crashed",
        leaseMillis: 500,
        timeoutMillis: 1,
        acknowledge: false
      })
      const lock = yield* Lock.make({ leaseDuration: "500 millis" })
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)))
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(yield* lock.tryWithLock("k")(Effect.succeed("mine")), Option.some("mine"))
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a waiter times out exactly at waitTimeout while another holds the lock", () =>
    Effect.gen(function* () {
      const backend = yield* LockBackend
      yield* backend.acquire({
        key: "lock:{k}",
        token: "other",
        leaseMillis: 60_000,
        timeoutMillis: 1,
        acknowledge: false
      })
      const lock = yield* Lock.make()
      const waiter = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "3 seconds" })(Effect.void)))
      yield* TestClock.adjust("3 seconds")
      const error = yield* Fiber.join(waiter)
      assert.strictEqual(error._tag, "TimedOut")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )
})
