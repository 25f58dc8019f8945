// The semaphore on the in-memory backend under TestClock: options, the limit, the line's order,
// renewal and loss, and random interleavings checked against what a semaphore must guarantee.
// The same calls run against real servers in the node-redis package's semaphore suite.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as TestClock from "effect/testing/TestClock"
import fc from "fast-check"
import { Lease } from "../src/Lease.ts"
import { LockBackend } from "../src/LockBackend.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"
import * as ReadWriteLock from "../src/ReadWriteLock.ts"
import * as Semaphore from "../src/Semaphore.ts"
import * as SemaphoreMetrics from "../src/SemaphoreMetrics.ts"

const client = (backend: LockBackend["Service"], options: Semaphore.SemaphoreOptions = {}) =>
  Semaphore.make({ leaseDuration: "1 second", ...options }).pipe(Effect.provideService(LockBackend, backend))

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit)
    ? (exit.cause.reasons.find((r) => r._tag === "Fail") as { error: E } | undefined)?.error
    : undefined

describe("Semaphore (in memory)", () => {
  it.effect("the permits gauge counts what bodies hold while they run, by namespace", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend, { namespace: "gauged" })
      const held = Effect.map(
        Metric.value(Metric.withAttributes(SemaphoreMetrics.permitsHeld, { namespace: "gauged" })),
        (state) => state.value
      )
      const inside = yield* Deferred.make<void>()
      const leave = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        semaphores.withPermits("k", { limit: 5, permits: 2, waitTimeout: "1 second" })(
          Effect.andThen(Deferred.succeed(inside, undefined), Deferred.await(leave))
        )
      )
      yield* Deferred.await(inside)
      const during = yield* held
      yield* semaphores.tryWithPermits("k", { limit: 5, permits: 3 })(
        Effect.flatMap(held, (both) => Effect.sync(() => assert.strictEqual(both, 5)))
      )
      yield* Deferred.succeed(leave, undefined)
      yield* Fiber.join(fiber)
      assert.deepStrictEqual([during, yield* held], [2, 0])
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("the permits gauge falls back when a body fails or its caller is interrupted", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend, { namespace: "gauged-ends" })
      const held = Effect.map(
        Metric.value(Metric.withAttributes(SemaphoreMetrics.permitsHeld, { namespace: "gauged-ends" })),
        (state) => state.value
      )
      const failed = yield* Effect.exit(
        semaphores.withPermits("k", { limit: 3, permits: 2, waitTimeout: "1 second" })(Effect.fail("boom"))
      )
      assert.isTrue(Exit.isFailure(failed))
      assert.strictEqual(yield* held, 0)
      const inside = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        semaphores.withPermits("k", { limit: 3, permits: 3, waitTimeout: "1 second" })(
          Effect.andThen(Deferred.succeed(inside, undefined), Effect.never)
        )
      )
      yield* Deferred.await(inside)
      assert.strictEqual(yield* held, 3)
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(yield* held, 0)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("bad permits and limits are InvalidArgument naming the option, before any server call", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend)
      const cases: ReadonlyArray<[unknown, unknown, string]> = [
        [1, 0, "limit"],
        [1, 1.5, "limit"],
        [1, undefined, "limit"],
        [1, 2 ** 31, "limit"],
        [0, 4, "permits"],
        [2.5, 4, "permits"],
        ["2", 4, "permits"],
        [5, 4, "permits"]
      ]
      for (const [permits, limit, field] of cases) {
        const exit = yield* Effect.exit(
          semaphores.withPermits("k", { permits, limit, waitTimeout: 100 } as unknown as Semaphore.WithPermitsOptions)(
            Effect.void
          )
        )
        const error = failureOf(exit) as { _tag: string; field: string } | undefined
        assert.strictEqual(error?._tag, "InvalidArgument", `${permits} of ${limit}`)
        assert.strictEqual(error?.field, field, `${permits} of ${limit}`)
      }
      const tried = yield* Effect.exit(semaphores.tryWithPermits("k", { permits: 3, limit: 2 })(Effect.void))
      assert.strictEqual((failureOf(tried) as { field: string }).field, "permits")
    })
  )

  it.effect("at most `limit` permits are held at once, and every caller is served", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend)
      let inside = 0
      let most = 0
      const body = Effect.acquireUseRelease(
        Effect.sync(() => {
          most = Math.max(most, ++inside)
        }),
        () => Effect.sleep("100 millis"),
        () => Effect.sync(() => void inside--)
      )
      const all = yield* Effect.forkChild(
        Effect.forEach(
          Array.from({ length: 7 }, (_, i) => i),
          () => semaphores.withPermits("pool", { limit: 3, waitTimeout: "10 seconds" })(body),
          { concurrency: "unbounded" }
        )
      )
      for (let i = 0; i < 100 && all.pollUnsafe() === undefined; i++) yield* TestClock.adjust("50 millis")
      const results = yield* Fiber.join(all)
      assert.strictEqual(results.length, 7)
      assert.strictEqual(most, 3, "three at once, never more")
    })
  )

  it.effect("a caller with another limit is refused with both limits while the semaphore is in use", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend)
      const entered = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        semaphores.withPermits("k", { limit: 2, waitTimeout: 100 })(
          Effect.andThen(Deferred.succeed(entered, undefined), Effect.never)
        )
      )
      yield* Deferred.await(entered)
      const exit = yield* Effect.exit(semaphores.withPermits("k", { limit: 5, waitTimeout: 100 })(Effect.void))
      const error = failureOf(exit) as { _tag: string; field: string; value: string; reason: string }
      assert.strictEqual(error._tag, "InvalidArgument")
      assert.strictEqual(error.field, "limit")
      assert.strictEqual(error.value, "5")
      assert.include(error.reason, "limit 2")
      yield* Fiber.interrupt(holder)
      // Unused again: the next caller's limit takes over.
      const got = yield* semaphores.tryWithPermits("k", { limit: 5, permits: 5 })(Effect.succeed("all five"))
      assert.deepStrictEqual(got, Option.some("all five"))
    })
  )

  it.effect("the line is first come, first served: a large request is not overtaken by small ones", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const a = yield* client(backend)
      const b = yield* client(backend)
      const order: Array<string> = []
      const hold = (name: string, millis: number) =>
        Effect.andThen(
          Effect.sync(() => order.push(name)),
          Effect.sleep(millis)
        )
      // One permit of four is held; a request for all four waits first, then a stream of single ones.
      const first = yield* Effect.forkChild(
        a.withPermits("k", { limit: 4, waitTimeout: "10 seconds" })(hold("one", 1_000))
      )
      yield* TestClock.adjust("10 millis")
      const big = yield* Effect.forkChild(
        b.withPermits("k", { limit: 4, permits: 4, waitTimeout: "10 seconds" })(hold("big", 100))
      )
      yield* TestClock.adjust("10 millis")
      const small = yield* Effect.forkChild(
        Effect.forEach(
          [1, 2, 3],
          (i) => a.withPermits("k", { limit: 4, waitTimeout: "10 seconds" })(hold(`small${i}`, 100)),
          { concurrency: "unbounded" }
        )
      )
      for (let i = 0; i < 200 && small.pollUnsafe() === undefined; i++) yield* TestClock.adjust("20 millis")
      yield* Fiber.join(first)
      yield* Fiber.join(big)
      yield* Fiber.join(small)
      assert.deepStrictEqual(order.slice(0, 2), ["one", "big"], "the big request goes before the small ones behind it")
      assert.strictEqual(order.length, 5)
    })
  )

  it.effect("each grant has its own fencing token, increasing across holders", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend)
      const tokens: Array<number> = []
      yield* Effect.forEach(
        [1, 2, 3, 4],
        () =>
          semaphores.withPermits("k", { limit: 2, waitTimeout: "5 seconds" })(
            Effect.andThen(
              Lease.use((lease) => Effect.sync(() => tokens.push(lease.fencingToken))),
              Effect.sleep("10 millis")
            )
          ),
        { concurrency: 1 }
      ).pipe(
        Effect.forkChild,
        Effect.flatMap((f) => Effect.andThen(TestClock.adjust("1 second"), Fiber.join(f)))
      )
      assert.strictEqual(tokens.length, 4)
      assert.deepStrictEqual(
        tokens.toSorted((x, y) => x - y),
        tokens
      )
      assert.strictEqual(new Set(tokens).size, 4)
    })
  )

  it.effect("permits are renewed while the body runs past the lease", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend)
      const long = yield* Effect.forkChild(
        semaphores.withPermits("k", { limit: 1, waitTimeout: 100 })(Effect.as(Effect.sleep("5 seconds"), "done"))
      )
      for (let i = 0; i < 60 && long.pollUnsafe() === undefined; i++) yield* TestClock.adjust("100 millis")
      assert.strictEqual(yield* Fiber.join(long), "done")
    })
  )

  it.effect("a scoped acquire holds its permits until the scope closes", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const semaphores = yield* client(backend)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const lease = yield* semaphores.acquire("k", { limit: 1, waitTimeout: 100 })
          assert.isAbove(lease.fencingToken, 0)
          const busy = yield* semaphores.tryWithPermits("k", { limit: 1 })(Effect.void)
          assert.isTrue(Option.isNone(busy))
        })
      )
      const free = yield* semaphores.tryWithPermits("k", { limit: 1 })(Effect.succeed(1))
      assert.deepStrictEqual(free, Option.some(1))
    })
  )
})

interface Step {
  readonly key: number
  readonly permits: number
  readonly mode: "wait" | "try"
  readonly waitMillis: number
  readonly holdMillis: number
  readonly interruptAfterMillis: number | undefined
}

const limits = [1, 2, 3]

const step: fc.Arbitrary<Step> = fc.record({
  key: fc.integer({ min: 0, max: 2 }),
  permits: fc.integer({ min: 1, max: 3 }),
  mode: fc.constantFrom("wait" as const, "try" as const),
  waitMillis: fc.integer({ min: 1, max: 3_000 }),
  holdMillis: fc.integer({ min: 0, max: 2_500 }),
  interruptAfterMillis: fc.option(fc.integer({ min: 0, max: 3_000 }), { nil: undefined })
})

describe("properties: semaphore interleavings", () => {
  it.effect(
    "random calls, timeouts and interruptions never hold more than the limit, never hang, and leave nothing held",
    () =>
      Effect.gen(function* () {
        const scenarios = fc.sample(fc.array(fc.array(step, { minLength: 1, maxLength: 4 }), { maxLength: 8 }), 40)
        for (const fibers of scenarios) {
          const backend = yield* MemoryBackend.make
          const clients = yield* Effect.forEach([0, 1], () => client(backend))
          const held = [0, 0, 0]
          let violations = 0
          const body = (key: number, permits: number, holdMillis: number) =>
            Effect.acquireUseRelease(
              Effect.sync(() => {
                held[key]! += permits
                if (held[key]! > limits[key]!) violations++
              }),
              () => Effect.sleep(holdMillis),
              () => Effect.sync(() => void (held[key]! -= permits))
            )
          const run = (steps: ReadonlyArray<Step>, index: number) =>
            Effect.forEach(
              steps,
              (s) => {
                const semaphores = clients[index % 2]!
                const permits = Math.min(s.permits, limits[s.key]!)
                const options = { limit: limits[s.key]!, permits }
                const call =
                  s.mode === "wait"
                    ? semaphores.withPermits(`k${s.key}`, { ...options, waitTimeout: s.waitMillis })(
                        body(s.key, permits, s.holdMillis)
                      )
                    : semaphores.tryWithPermits(`k${s.key}`, options)(body(s.key, permits, s.holdMillis))
                const bounded =
                  s.interruptAfterMillis === undefined ? call : Effect.timeoutOption(call, s.interruptAfterMillis)
                return Effect.ignore(bounded)
              },
              { discard: true }
            )
          const all = yield* Effect.forkChild(Effect.forEach(fibers, run, { concurrency: "unbounded", discard: true }))
          for (let i = 0; i < 120 && all.pollUnsafe() === undefined; i++) yield* TestClock.adjust("500 millis")
          assert.isDefined(all.pollUnsafe(), "every call finished")
          yield* Fiber.join(all)
          assert.strictEqual(violations, 0, "never more permits held than the limit")
          // Nothing is left held: a fresh client gets every semaphore's whole limit at once.
          const fresh = yield* client(backend)
          for (const key of [0, 1, 2]) {
            const got = yield* fresh.tryWithPermits(`k${key}`, { limit: limits[key]!, permits: limits[key]! })(
              Effect.void
            )
            assert.isTrue(got._tag === "Some", `k${key} is free at the end`)
          }
        }
      }),
    60_000
  )
})

describe("ReadWriteLock (in memory)", () => {
  it.effect("readers share, a writer is alone, and a waiting writer goes before readers who came after it", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const locks = yield* ReadWriteLock.make({ leaseDuration: "1 second" }).pipe(
        Effect.provideService(LockBackend, backend)
      )
      const events: Array<string> = []
      let readers = 0
      let writers = 0
      let mostReaders = 0
      let mixed = 0
      const read = (name: string) =>
        locks.withReadLock("doc", { waitTimeout: "10 seconds" })(
          Effect.acquireUseRelease(
            Effect.sync(() => {
              readers++
              mostReaders = Math.max(mostReaders, readers)
              if (writers > 0) mixed++
              events.push(name)
            }),
            () => Effect.sleep("200 millis"),
            () => Effect.sync(() => void readers--)
          )
        )
      const write = (name: string) =>
        locks.withWriteLock("doc", { waitTimeout: "10 seconds" })(
          Effect.acquireUseRelease(
            Effect.sync(() => {
              writers++
              if (writers > 1 || readers > 0) mixed++
              events.push(name)
            }),
            () => Effect.sleep("100 millis"),
            () => Effect.sync(() => void writers--)
          )
        )
      const all = yield* Effect.forkChild(
        Effect.all(
          [
            read("r1"),
            read("r2"),
            Effect.andThen(Effect.sleep("50 millis"), write("w1")),
            Effect.andThen(Effect.sleep("100 millis"), read("r3"))
          ],
          { concurrency: "unbounded" }
        )
      )
      for (let i = 0; i < 100 && all.pollUnsafe() === undefined; i++) yield* TestClock.adjust("20 millis")
      yield* Fiber.join(all)
      assert.strictEqual(mixed, 0, "a writer never overlaps a reader or another writer")
      assert.strictEqual(mostReaders, 2, "the two first readers shared")
      assert.deepStrictEqual(events, ["r1", "r2", "w1", "r3"], "the reader after the waiting writer waited for it")
    })
  )
})
