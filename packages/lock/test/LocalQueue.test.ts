// In-process turns: fibers of one client queue per key in arrival order, the wait counts against
// waitTimeout, and tryWithLock never waits for another fiber of the same client.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scheduler from "effect/Scheduler"
import { TestClock } from "effect/testing"
import * as Lock from "../src/Lock.ts"
import { type Backend, LockBackend } from "../src/LockBackend.ts"
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

describe("in-process turns: interruption, order and what a timeout reports", () => {
  /** A lock whose key `k` is held by another fiber of the same client until `release` completes. */
  const heldByAnotherFiber = Effect.gen(function* () {
    const lock = yield* Lock.make({ leaseDuration: "30 seconds" })
    const inside = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const holder = yield* Effect.forkChild(
      Deferred.succeed(inside, undefined).pipe(
        Effect.andThen(Deferred.await(release)),
        lock.withLock("k", { waitTimeout: "1 second" })
      )
    )
    yield* Deferred.await(inside)
    return { lock, release, holder }
  }).pipe(Effect.provide(MemoryBackend.layer))

  it.effect("a fiber waiting for its turn stops at once when interrupted", () =>
    Effect.gen(function* () {
      const { lock, release, holder } = yield* heldByAnotherFiber
      const waiter = yield* Effect.forkChild(lock.withLock("k", { waitTimeout: "30 seconds" })(Effect.void))
      yield* TestClock.adjust("100 millis")
      // No clock advance and no release: the interrupt alone must end the wait.
      yield* Fiber.interrupt(waiter)
      assert.isDefined(waiter.pollUnsafe(), "the waiter ended without its turn coming")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      // The turn was not lost with the interrupted waiter.
      assert.strictEqual(yield* lock.withLock("k", { waitTimeout: "1 second" })(Effect.succeed("free")), "free")
    })
  )

  it.effect("an interruption at any step of a call leaves neither the key's turn nor the lock taken", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ leaseDuration: "30 seconds" })
      const other = yield* Lock.make({ leaseDuration: "30 seconds" })
      // The caller yields to the scheduler every three steps, so the test's own yields let it
      // advance a little at a time: interrupting after `yields` yields interrupts it at every point
      // of a call, such as between taking the key's turn and arranging to hand it on, or between
      // the acquisition's success and the end of its interruptible part.
      let interruptedMidway = 0
      for (let yields = 0; yields < 60; yields++) {
        const key = `k${yields}`
        const fiber = yield* Effect.forkChild(
          lock
            .withLock(key, { waitTimeout: "1 second" })(Effect.void)
            .pipe(Effect.provideService(Scheduler.MaxOpsBeforeYield, 3))
        )
        for (let i = 0; i < yields; i++) yield* Effect.yieldNow
        if (fiber.pollUnsafe() === undefined) interruptedMidway++
        yield* Fiber.interrupt(fiber)
        const where = `interrupted after ${yields} yields`
        // Another client sees the lock free (released), and so does this one (its turn passed on).
        assert.deepStrictEqual(yield* other.tryWithLock(key)(Effect.succeed("free")), Option.some("free"), where)
        assert.deepStrictEqual(yield* lock.tryWithLock(key)(Effect.succeed("free")), Option.some("free"), where)
      }
      assert.isAbove(interruptedMidway, 10, "the calls were interrupted at many points, not only before or after")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a caller interrupted while its body runs releases once the body's slow finalizers end", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ leaseDuration: "30 seconds" })
      const other = yield* Lock.make({ leaseDuration: "30 seconds" })
      const started = yield* Deferred.make<void>()
      // The body's cleanup takes longer than the release's one-second bound: the bound must count
      // from the release, not from the interruption.
      const body = Deferred.succeed(started, undefined).pipe(
        Effect.andThen(Effect.never),
        Effect.onInterrupt(() => Effect.sleep("1500 millis"))
      )
      const caller = yield* Effect.forkChild(lock.withLock("k", { waitTimeout: "1 second" })(body))
      yield* Deferred.await(started)
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(caller))
      yield* TestClock.adjust("1500 millis")
      yield* Fiber.join(interrupting)
      assert.isDefined(caller.pollUnsafe(), "the call ended once the body's finalizers had run")
      assert.deepStrictEqual(yield* other.tryWithLock("k")(Effect.succeed("free")), Option.some("free"))
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("tryWithLock cannot slip in between a release and the waiting fiber it hands the turn to", () =>
    Effect.gen(function* () {
      const { lock, release, holder } = yield* heldByAnotherFiber
      const waiterInside = yield* Deferred.make<void>()
      const waiterDone = yield* Deferred.make<void>()
      const waiter = yield* Effect.forkChild(
        lock.withLock("k", { waitTimeout: "30 seconds" })(
          Deferred.succeed(waiterInside, undefined).pipe(
            Effect.andThen(Deferred.await(waiterDone)),
            Effect.as("waiter")
          )
        )
      )
      yield* TestClock.adjust("1 millis")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      // The holder is gone; the turn must already belong to the fiber that was waiting.
      const tried = yield* lock.tryWithLock("k")(Effect.succeed("try"))
      assert.isTrue(Option.isNone(tried), "the turn went to the fiber that was already waiting")
      yield* Deferred.await(waiterInside)
      yield* Deferred.succeed(waiterDone, undefined)
      assert.strictEqual(yield* Fiber.join(waiter), "waiter")
    })
  )

  it.effect("a fiber that times out behind another reports the whole wait, as busy", () =>
    Effect.gen(function* () {
      const { lock, release, holder } = yield* heldByAnotherFiber
      const waiter = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void)))
      yield* TestClock.adjust("5 seconds")
      const error = yield* Fiber.join(waiter)
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") {
        assert.strictEqual(error.waitedMillis, 5000)
        assert.strictEqual(error.reason, "busy")
        assert.strictEqual(error.attempts, 0)
      }
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
    })
  )

  it.effect("over an ordered backend the next fiber asks right behind the release, not after its reply", () =>
    Effect.gen(function* () {
      // The memory backend with a slow release reply: the key is freed at once, the answer takes 50 ms
      // (a round trip). The next fiber's acquisition must not wait for that answer.
      const memory = yield* MemoryBackend.make
      const events: Array<string> = []
      const slowReply: Backend = {
        ...memory,
        // Without transfers: this is the path of ordered backends that cannot hand a lock over.
        transfer: undefined,
        acquire: (request) =>
          Effect.tap(memory.acquire(request), (reply) => Effect.sync(() => events.push(`acquire ${reply._tag}`))),
        release: (request) =>
          Effect.tap(memory.release(request), () =>
            Effect.andThen(
              Effect.sync(() => events.push("released")),
              Effect.andThen(
                Effect.sleep("50 millis"),
                Effect.sync(() => events.push("release answered"))
              )
            )
          )
      }
      assert.isTrue(memory.ordered, "the in-memory backend is ordered")
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, slowReply))
      const inside = yield* Deferred.make<void>()
      const leave = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Deferred.await(leave)),
          lock.withLock("k", { waitTimeout: "1 second" })
        )
      )
      yield* Deferred.await(inside)
      const next = yield* Effect.forkChild(
        Effect.sync(() => events.push("next body")).pipe(lock.withLock("k", { waitTimeout: "1 second" }))
      )
      yield* TestClock.adjust("1 millis")
      yield* Deferred.succeed(leave, undefined)
      yield* TestClock.adjust("1 millis")
      // Still before the first release answered: the next fiber already held the key and ran.
      assert.deepStrictEqual(events.slice(0, 4), ["acquire Acquired", "released", "acquire Acquired", "next body"])
      assert.notInclude(events, "release answered")
      yield* TestClock.adjust("200 millis")
      yield* Fiber.join(holder)
      yield* Fiber.join(next)
      assert.deepStrictEqual(events.slice(4), ["released", "release answered", "release answered"])
    })
  )
})
