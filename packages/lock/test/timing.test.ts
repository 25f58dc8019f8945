// Timing logic under TestClock: deadlines are exact, backoff never sleeps past them, and the usable
// lease is counted from when the last successful request was sent.
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { TestClock } from "effect/testing"
import * as Lock from "../src/Lock.ts"
import { LockRedisError } from "../src/LockError.ts"
import { nextDelay } from "../src/internal/backoff.ts"
import { usableLeaseMillis } from "../src/internal/settings.ts"
import { busy, scripted, temporary } from "./fakeBackend.ts"

describe("acquisition deadline", () => {
  it.effect("a busy lock fails with TimedOut exactly at waitTimeout, with no attempt after it", () =>
    Effect.gen(function* () {
      const fake = scripted({ acquire: () => busy })
      const lock = yield* Lock.make({ leaseDuration: "30 seconds" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void)))
      yield* TestClock.adjust("4999 millis")
      assert.isUndefined(fiber.pollUnsafe(), "still waiting before the deadline")
      yield* TestClock.adjust("1 millis")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") {
        assert.strictEqual(error.waitedMillis, 5000)
        assert.isAbove(error.attempts, 5, "backoff kept retrying")
        assert.isBelow(error.attempts, 40, "backoff grew instead of polling")
      }
      for (const request of fake.calls.acquire) assert.isAbove(request.timeoutMillis, 0)
      assert.strictEqual(fake.calls.release.length, 0, "a definite busy reply needs no cleanup")
    })
  )

  it.effect("an attempt that never replies is abandoned at the deadline and cleanup adds at most one second", () =>
    Effect.gen(function* () {
      const fake = scripted({ acquire: () => Effect.never, release: () => Effect.never })
      const lock = yield* Lock.make().pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "2 seconds" })(Effect.void)))
      yield* TestClock.adjust("2 seconds")
      assert.isUndefined(fiber.pollUnsafe(), "cleanup release in progress")
      assert.strictEqual(fake.calls.release.length, 1, "the abandoned attempt is released")
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") assert.strictEqual(error.reason, "unavailable")
    })
  )

  it.effect("a waitTimeout spent before the first attempt still makes that one attempt", () =>
    Effect.gen(function* () {
      // Monotonic time moves on a millisecond at every reading, so a nanosecond's budget is spent
      // between the call and its first attempt (TestClock alone never lets that happen).
      const real = yield* Clock.Clock
      let reads = 0
      const ticking = () => real.monotonicTimeNanosUnsafe() + BigInt(reads++) * 1_000_000n
      const clock: Clock.Clock = {
        ...real,
        monotonicTimeNanosUnsafe: ticking,
        monotonicTimeNanos: Effect.sync(ticking)
      }

      const free = scripted({})
      const lock = yield* Lock.make().pipe(Effect.provide(free.layer))
      const value = yield* lock
        .withLock("k", { waitTimeout: "1 nanos" })(Effect.succeed("ran"))
        .pipe(Effect.provideService(Clock.Clock, clock))
      assert.strictEqual(value, "ran", "a free key is acquired")
      assert.strictEqual(free.calls.acquire.length, 1)
      assert.isAbove(free.calls.acquire[0]!.timeoutMillis, 0, "the attempt has a time limit of its own")

      const taken = scripted({ acquire: () => busy })
      const other = yield* Lock.make().pipe(Effect.provide(taken.layer))
      const error = yield* Effect.flip(
        other.withLock("k", { waitTimeout: "1 nanos" })(Effect.void).pipe(Effect.provideService(Clock.Clock, clock))
      )
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") {
        assert.strictEqual(error.reason, "busy", "what the one attempt found, not an outage")
        assert.strictEqual(error.attempts, 1)
      }
      assert.strictEqual(taken.calls.acquire.length, 1, "no second attempt after the budget")
    })
  )

  it.effect("a grant slower than the usable lease is abandoned: the body never starts on it", () =>
    Effect.gen(function* () {
      const fake = scripted({
        acquire: () => Effect.sleep("990 millis").pipe(Effect.as({ _tag: "Acquired" as const, fence: 1 }))
      })
      const lock = yield* Lock.make({ leaseDuration: "1 second" }).pipe(Effect.provide(fake.layer))
      let ran = false
      const fiber = yield* Effect.forkChild(
        Effect.flip(lock.withLock("k", { waitTimeout: "2 seconds" })(Effect.sync(() => (ran = true))))
      )
      yield* TestClock.adjust("2 seconds")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TimedOut")
      assert.isFalse(ran)
      for (const request of fake.calls.acquire) {
        assert.isAtMost(request.timeoutMillis, usableLeaseMillis(1000), "no attempt may outlast the usable lease")
      }
      assert.strictEqual(fake.calls.release.length, 1, "the abandoned grant is released")
    })
  )

  it.effect("tryWithLock retries temporary failures for one second, then TimedOut", () =>
    Effect.gen(function* () {
      const fake = scripted({ acquire: () => Effect.fail(temporary("MASTERDOWN")) })
      const lock = yield* Lock.make().pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(Effect.flip(lock.tryWithLock("k")(Effect.void)))
      yield* TestClock.adjust("999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") assert.strictEqual(error.reason, "unavailable")
    })
  )

  it.effect("tryWithLock's budget is bounded by a short usable lease", () =>
    Effect.gen(function* () {
      const fake = scripted({ acquire: () => Effect.fail(temporary()) })
      const lock = yield* Lock.make({ leaseDuration: "100 millis" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(Effect.flip(lock.tryWithLock("k")(Effect.void)))
      const usable = usableLeaseMillis(100)
      yield* TestClock.adjust(usable)
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TimedOut")
    })
  )
})

describe("renewal and the usable lease", () => {
  it.effect("a renewal that never replies ends in LockLost exactly when the usable lease is spent", () =>
    Effect.gen(function* () {
      const fake = scripted({ renew: () => Effect.never })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "1 second" })(Effect.never)))
      const usable = usableLeaseMillis(300)
      yield* TestClock.adjust(usable - 1)
      assert.isUndefined(fiber.pollUnsafe(), "still within the usable lease")
      assert.strictEqual(fake.calls.renew[0]!.timeoutMillis, 100, "sent a third of a lease in, for one period")
      assert.isAtLeast(fake.calls.renew.length, 2, "cut at one renewal period, and sent again")
      yield* TestClock.adjust(1)
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") assert.strictEqual(error.reason, "expired")
    })
  )

  it.effect("a renewal attempt waits at most a renewal period, so one that hangs is retried within the lease", () =>
    Effect.gen(function* () {
      // The first renewal gets no reply: the backend gives up when its time limit ends, as a real one does.
      const fake = scripted({
        renew: (request, attempt) =>
          attempt === 1
            ? Effect.andThen(Effect.sleep(request.timeoutMillis), Effect.fail(temporary("TIMEOUT")))
            : Effect.succeed(true)
      })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(
        lock.withLock("k", { waitTimeout: "1 second" })(Effect.sleep("1 second").pipe(Effect.as("done")))
      )
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(fiber), "done")
      assert.isAtMost(fake.calls.renew[0]!.timeoutMillis, 100, "the first attempt's limit is one renewal period")
    })
  )

  it.effect("temporary renewal failures are retried, and the body outlives many leases", () =>
    Effect.gen(function* () {
      const fake = scripted({
        renew: (_, attempt) => (attempt % 3 === 1 ? Effect.fail(temporary("BUSY")) : Effect.succeed(true))
      })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(
        lock.withLock("k", { waitTimeout: "1 second" })(Effect.sleep("3 seconds").pipe(Effect.as("done")))
      )
      yield* TestClock.adjust("3 seconds")
      assert.strictEqual(yield* Fiber.join(fiber), "done")
      assert.isAtLeast(fake.calls.renew.length, 10)
    })
  )

  it.effect("a non-retryable renewal failure is LockLost carrying the cause, and the body is interrupted", () =>
    Effect.gen(function* () {
      const fatal = new LockRedisError({
        command: "renew",
        kind: "server",
        code: "NOPERM",
        reply: "NOPERM no permissions",
        retryable: false,
        mayHaveExecuted: false
      })
      const fake = scripted({ renew: () => Effect.fail(fatal) })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "1 second" })(Effect.never)))
      yield* TestClock.adjust("100 millis")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") {
        assert.strictEqual(error.reason, "failed")
        assert.strictEqual(error.cause, fatal)
      }
    })
  )
})

describe("batched renewal", () => {
  it.effect("the leases a client holds are renewed together, one batch per tick", () =>
    Effect.gen(function* () {
      const fake = scripted({ renewAll: (requests) => Effect.succeed(requests.map(() => true)) })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const fibers = yield* Effect.forEach(
        Array.from({ length: 50 }, (_, i) => `k${i}`),
        (key) => Effect.forkChild(lock.withLock(key, { waitTimeout: "1 second" })(Effect.sleep("1 second")))
      )
      yield* TestClock.adjust("1 second")
      yield* Effect.forEach(fibers, Fiber.join)
      assert.strictEqual(fake.calls.renew.length, 0, "no lease was renewed on its own")
      assert.isAtLeast(fake.calls.renewAll.length, 9, "renewed every third of a lease for a second")
      assert.isAtMost(fake.calls.renewAll.length, 12, "one batch per tick, not one per lock")
      for (const batch of fake.calls.renewAll) assert.strictEqual(batch.length, 50)
    })
  )

  it.effect("a batch reply that comes after one lease's usable time loses that lease only", () =>
    Effect.gen(function* () {
      // Lease 300 ms: usable 283 ms, renewal due every 100 ms, leases due within 25 ms share a batch.
      const fake = scripted({
        renewAll: (requests) => Effect.sleep("190 millis").pipe(Effect.as(requests.map(() => true)))
      })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const early = yield* Effect.forkChild(Effect.flip(lock.withLock("a", { waitTimeout: "1 second" })(Effect.never)))
      yield* TestClock.adjust("20 millis")
      const late = yield* Effect.forkChild(
        lock.withLock("b", { waitTimeout: "1 second" })(Effect.sleep("250 millis").pipe(Effect.as("kept")))
      )
      // The batch goes out at 100 ms with both leases and answers at 290 ms: after a's usable lease
      // (283 ms), before b's (303 ms).
      yield* TestClock.adjust("262 millis")
      assert.isUndefined(early.pollUnsafe(), "a is still within its usable lease at 282 ms")
      yield* TestClock.adjust("1 millis")
      const error = yield* Fiber.join(early)
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") assert.strictEqual(error.reason, "expired")
      assert.strictEqual(fake.calls.renewAll[0]?.length, 2, "both leases went in one batch")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(late), "kept", "the same late reply renewed b")
    })
  )

  it.effect("each lease of one batch gets its own reply: renewed, retried alone, or lost", () =>
    Effect.gen(function* () {
      // Lease 300 ms: renewal due every 100 ms. In the first batch "b" gets a temporary failure and
      // "c" is found held by someone else; "a" is renewed. Every later batch renews everything.
      let batches = 0
      const fake = scripted({
        renewAll: (requests) =>
          Effect.sync(() => {
            const first = batches++ === 0
            return requests.map((request) => {
              if (!first) return true
              if (request.key.endsWith("{b}")) return temporary("BUSY")
              return !request.key.endsWith("{c}")
            })
          })
      })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const hold = (key: string) =>
        Effect.forkChild(
          Effect.flip(lock.withLock(key, { waitTimeout: "1 second" })(Effect.sleep("1 second"))).pipe(
            Effect.orElseSucceed(() => "kept" as const)
          )
        )
      const [a, b, c] = yield* Effect.all([hold("a"), hold("b"), hold("c")])
      yield* TestClock.adjust("100 millis")
      const lost = yield* Fiber.join(c)
      assert.notStrictEqual(lost, "kept")
      if (lost !== "kept") {
        assert.strictEqual(lost._tag, "LockLost")
        if (lost._tag === "LockLost") assert.strictEqual(lost.reason, "ownership")
      }
      assert.deepStrictEqual(
        fake.calls.renewAll[0]?.map((request) => request.key.slice(-3)),
        ["{a}", "{b}", "{c}"],
        "all three went in one batch"
      )
      // The retry of "b" goes out on its own, well before the next tick (backoff 7-15 ms).
      yield* TestClock.adjust("20 millis")
      assert.deepStrictEqual(
        fake.calls.renewAll[1]?.map((request) => request.key.slice(-3)),
        ["{b}"],
        "b was retried alone"
      )
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(a), "kept")
      assert.strictEqual(yield* Fiber.join(b), "kept")
    })
  )
})

// A 1 s lease whose body ends at 200 ms, before the first renewal: the usable lease ends at 948 ms.
// The first release attempt fails without running at `failsAt`; the retry finds the key gone.
const releaseRetriedAt = (failsAtMillis: number) =>
  Effect.gen(function* () {
    let calls = 0
    const fake = scripted({
      release: () =>
        Effect.suspend(() => {
          calls++
          return calls === 1
            ? Effect.andThen(Effect.sleep(failsAtMillis - 200), Effect.fail(temporary("OFFLINE")))
            : Effect.succeed(false)
        })
    })
    const lock = yield* Lock.make({ leaseDuration: "1 second" }).pipe(Effect.provide(fake.layer))
    const fiber = yield* Effect.forkChild(
      Effect.result(lock.withLock("k", { waitTimeout: "1 second" })(Effect.as(Effect.sleep("200 millis"), "value")))
    )
    for (let elapsed = 0; elapsed < 1_300 && fiber.pollUnsafe() === undefined; elapsed += 10) {
      yield* TestClock.adjust("10 millis")
    }
    return { result: yield* Fiber.join(fiber), calls }
  })

describe("tryWithLock behind another fiber of its client", () => {
  it.effect("an outage that fiber is retrying is TimedOut (unavailable) at once, not busy", () =>
    Effect.gen(function* () {
      const down = scripted({ acquire: () => Effect.fail(temporary("OFFLINE")) })
      const lock = yield* Lock.make().pipe(Effect.provide(down.layer))
      const waiting = yield* Effect.forkChild(
        Effect.flip(lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void))
      )
      yield* TestClock.adjust("1 millis")
      assert.isAtLeast(down.calls.acquire.length, 1, "the waiting fiber's first attempt failed")
      const error = yield* Effect.flip(lock.tryWithLock("k")(Effect.void))
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") {
        assert.strictEqual(error.reason, "unavailable")
        assert.strictEqual(error.attempts, 0)
        assert.isTrue(error.lastError instanceof LockRedisError && error.lastError.code === "OFFLINE", "its last error")
      }
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual((yield* Fiber.join(waiting))._tag, "TimedOut")
    })
  )

  it.effect("a busy lock that fiber waits for is busy, and so is one it holds", () =>
    Effect.gen(function* () {
      let calls = 0
      // Busy twice, then free: the waiting fiber gets it and holds it until released.
      const fake = scripted({
        acquire: () => (++calls <= 2 ? busy : Effect.succeed({ _tag: "Acquired" as const, fence: 1 }))
      })
      const lock = yield* Lock.make().pipe(Effect.provide(fake.layer))
      const waiting = yield* Effect.forkChild(
        Effect.sleep("10 seconds").pipe(lock.withLock("k", { waitTimeout: "30 seconds" }))
      )
      yield* TestClock.adjust("1 millis")
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)), "busy while the fiber waits")
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(calls, 3, "the waiting fiber holds the lock now")
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)), "busy while the fiber holds it")
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(waiting)
    })
  )
})

describe("release", () => {
  it.effect("retries temporary failures within one second in all, then gives up and returns the result", () =>
    Effect.gen(function* () {
      const flaky = scripted({ release: () => Effect.fail(temporary("READONLY")) })
      const lock = yield* Lock.make().pipe(Effect.provide(flaky.layer))
      const fiber = yield* Effect.forkChild(lock.withLock("k", { waitTimeout: "1 second" })(Effect.succeed("value")))
      yield* TestClock.adjust("999 millis")
      assert.isUndefined(fiber.pollUnsafe(), "still retrying the release")
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(fiber), "value", "an unreachable release keeps the body's result")
      assert.isAbove(flaky.calls.release.length, 3)
    })
  )

  it.effect("a release that succeeds on retry finds the lock still ours", () =>
    Effect.gen(function* () {
      let calls = 0
      const fake = scripted({
        release: () => (++calls < 3 ? Effect.fail(temporary("MOVED")) : Effect.succeed(false))
      })
      const lock = yield* Lock.make().pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(
        Effect.flip(lock.withLock("k", { waitTimeout: "1 second" })(Effect.succeed("value")))
      )
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "LockLost", "a retry that finds another owner still reports it")
      assert.strictEqual(calls, 3)
    })
  )

  it.effect(
    "a retry that finds the key gone after the lease could have run out is no loss: the body ended in time",
    () =>
      Effect.gen(function* () {
        // Retried at about 960 ms, past the usable lease's end: the key may simply have expired.
        const { calls, result } = yield* releaseRetriedAt(950)
        assert.strictEqual(calls, 2)
        assert.isTrue(result._tag === "Success" && result.success === "value", "the body's value, not LockLost")
      })
  )

  it.effect("a retry that finds the key gone while the lease still held is a loss", () =>
    Effect.gen(function* () {
      // Retried at about 610 ms: the lease had 340 ms left, so the key was taken from its holder.
      const { calls, result } = yield* releaseRetriedAt(600)
      assert.strictEqual(calls, 2)
      assert.isTrue(result._tag === "Failure" && result.failure._tag === "LockLost")
    })
  )
})

describe("backoff", () => {
  it.effect("grows exponentially up to the cap and never exceeds the time left", () =>
    Effect.gen(function* () {
      const policy = { baseMillis: 10, capMillis: 1000 }
      for (let attempt = 0; attempt < 20; attempt++) {
        const delay = yield* nextDelay(policy, attempt, 1_000_000)
        const exponential = Math.min(1000, 10 * 2 ** attempt)
        assert.isAtLeast(delay, exponential / 2)
        assert.isAtMost(delay, exponential)
        assert.isAtMost(yield* nextDelay(policy, attempt, 7), 7, "clamped to the deadline")
      }
      assert.isAtMost(yield* nextDelay(policy, 10, 1_000_000, 3), 4, "no later than just after the holder's lease")
      assert.strictEqual(yield* nextDelay(policy, 3, -5), 0)
    })
  )

  it.effect("a waiter that gives up releases and leaves the queue at once: at most a second past waitTimeout", () =>
    Effect.gen(function* () {
      // The first attempt finds the key busy and registers the caller; the next gets no reply (it
      // may have written). At the deadline both the release and the leave hang until their limit.
      const backend = scripted({
        acquire: (_request, attempt) => (attempt === 1 ? busy : Effect.never),
        release: () => Effect.never,
        leave: (_key, _id, timeoutMillis) => Effect.sleep(timeoutMillis)
      })
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(backend.layer))
      const fiber = yield* lock
        .withLock("k", { waitTimeout: "3 seconds" })(Effect.void)
        .pipe(Effect.flip, Effect.forkChild)
      yield* TestClock.adjust("3999 millis")
      assert.isUndefined(fiber.pollUnsafe(), "still cleaning up within its second")
      yield* TestClock.adjust("1 millis")
      assert.isDefined(fiber.pollUnsafe(), "returned a second past waitTimeout, not two")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TimedOut")
      assert.isAbove(backend.calls.release.length, 0, "the uncertain write was released")
    })
  )
})
