// Spans of lock calls: made when a tracing backend is installed, skipped (they would cost more than
// the call's own work and nobody could see them) under Effect's default in-memory tracer.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as TestClock from "effect/testing/TestClock"
import * as Tracer from "effect/Tracer"
import * as Lock from "../src/Lock.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"
import { busy, scripted } from "./fakeBackend.ts"

const eventsOf = (span: Tracer.Span) =>
  (span as Tracer.NativeSpan).events.map(([name, , attributes]) => ({ name, attributes }))

const recordingTracer = () => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { spans, tracer }
}

const makeLock = Lock.make({ namespace: "traced" }).pipe(Effect.provide(MemoryBackend.layer))

describe("tracing", () => {
  it.effect("with a tracer installed, withLock and tryWithLock run in spans naming the key", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recordingTracer()
      const lock = yield* makeLock
      const inner = yield* lock
        .withLock("a", { waitTimeout: "1 second" })(Effect.currentSpan)
        .pipe(Effect.withTracer(tracer))
      yield* lock.tryWithLock("b")(Effect.void).pipe(Effect.withTracer(tracer))

      const names = spans.map((span) => span.name)
      assert.deepStrictEqual(names, ["Lock.withLock", "Lock.tryWithLock"])
      assert.strictEqual(inner.name, "Lock.withLock", "the body runs inside the call's span")
      assert.strictEqual(spans[0]!.attributes.get("lock.key"), "traced:{a}")
      assert.strictEqual(spans[1]!.attributes.get("lock.key"), "traced:{b}")
      assert.strictEqual(spans[0]!.status._tag, "Ended")
    })
  )

  it.effect("a failed call ends its span with the failure", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recordingTracer()
      const lock = yield* makeLock
      yield* Effect.ignore(
        lock.withLock("c", { waitTimeout: "1 second" })(Effect.fail("boom")).pipe(Effect.withTracer(tracer))
      )
      const status = spans[0]!.status
      assert.strictEqual(status._tag, "Ended")
      assert.isTrue(status._tag === "Ended" && status.exit._tag === "Failure")
    })
  )

  it.effect("under the default tracer no span is made: the body sees the caller's span", () =>
    Effect.gen(function* () {
      const lock = yield* makeLock
      const inner = yield* lock
        .withLock("d", { waitTimeout: "1 second" })(Effect.currentSpan)
        .pipe(Effect.withSpan("caller"))
      assert.strictEqual(inner.name, "caller")
      const outside = yield* Effect.option(lock.withLock("e", { waitTimeout: "1 second" })(Effect.currentSpan))
      assert.isTrue(Option.isNone(outside))
    })
  )

  it.effect("a traced call records its attempts, release and outcome on its span", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recordingTracer()
      const lock = yield* makeLock
      yield* lock.withLock("f", { waitTimeout: "1 second" })(Effect.void).pipe(Effect.withTracer(tracer))
      const span = spans[0]!
      assert.strictEqual(span.attributes.get("lock.outcome"), "acquired")
      const events = eventsOf(span)
      assert.deepStrictEqual(
        events.map((event) => [
          event.name,
          event.attributes["lock.attempt.result"] ?? event.attributes["lock.release.result"]
        ]),
        [
          ["lock.attempt", "acquired"],
          ["lock.release", "released"]
        ]
      )
    })
  )

  it.effect("a timeout records the busy attempts, the waits between them and the reason", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recordingTracer()
      const taken = scripted({ acquire: () => busy })
      const lock = yield* Lock.make({ namespace: "traced" }).pipe(Effect.provide(taken.layer))
      const fiber = yield* lock
        .withLock("g", { waitTimeout: "200 millis" })(Effect.void)
        .pipe(Effect.withTracer(tracer), Effect.flip, Effect.forkChild)
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "TimedOut")
      const span = spans[0]!
      assert.strictEqual(span.attributes.get("lock.outcome"), "timed_out")
      assert.strictEqual(span.attributes.get("lock.timed_out.reason"), "busy")
      const names = eventsOf(span).map((event) => event.name)
      assert.isAbove(names.filter((name) => name === "lock.attempt").length, 1)
      assert.include(names, "lock.wait")
    })
  )

  it.effect("a lock lost at release is recorded with its phase", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recordingTracer()
      const stolen = scripted({ release: () => Effect.succeed(false) })
      const lock = yield* Lock.make({ namespace: "traced" }).pipe(Effect.provide(stolen.layer))
      yield* Effect.ignore(lock.withLock("h", { waitTimeout: "1 second" })(Effect.void).pipe(Effect.withTracer(tracer)))
      const span = spans[0]!
      assert.strictEqual(span.attributes.get("lock.outcome"), "lost")
      assert.strictEqual(span.attributes.get("lock.lost.phase"), "release")
    })
  )

  it.effect("metrics carry OpenTelemetry names and units", () =>
    Effect.gen(function* () {
      const lock = yield* makeLock
      yield* lock.withLock("i", { waitTimeout: "1 second" })(Effect.void)
      const snapshots = yield* Metric.snapshot
      const units = Object.fromEntries(
        snapshots
          .filter((snapshot) => snapshot.id.startsWith("sage.lock."))
          .map((snapshot) => [snapshot.id, snapshot.attributes?.["unit"]])
      )
      assert.deepStrictEqual(units, { "sage.lock.acquisitions": "{acquisition}", "sage.lock.wait.duration": "s" })
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("a call handed the lock by a transfer records it as its attempt, and counts as acquired", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recordingTracer()
      const lock = yield* makeLock
      const inside = yield* Deferred.make<void>()
      const leave = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Deferred.await(leave)),
          lock.withLock("t", { waitTimeout: "1 second" })
        )
      )
      yield* Deferred.await(inside)
      const next = yield* Effect.forkChild(
        lock.withLock("t", { waitTimeout: "1 second" })(Effect.void).pipe(Effect.withTracer(tracer))
      )
      yield* TestClock.adjust("1 millis")
      yield* Deferred.succeed(leave, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(next)
      const span = spans[0]!
      const attempts = eventsOf(span).filter((event) => event.name === "lock.attempt")
      assert.deepStrictEqual(attempts, [
        { name: "lock.attempt", attributes: { "lock.attempt": 0, "lock.attempt.result": "transferred" } }
      ])
      assert.strictEqual(span.attributes.get("lock.outcome"), "acquired")
      const acquired = (yield* Metric.snapshot).filter(
        (snapshot) => snapshot.id === "sage.lock.acquisitions" && snapshot.attributes?.["outcome"] === "acquired"
      )
      assert.deepStrictEqual(
        acquired.map((snapshot) => (snapshot.state as { readonly count: number }).count),
        [2],
        "the holder's acquisition and the transfer"
      )
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )
})
