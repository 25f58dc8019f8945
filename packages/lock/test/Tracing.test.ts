// Spans of lock calls: made when a tracing backend is installed, skipped (they would cost more than
// the call's own work and nobody could see them) under Effect's default in-memory tracer.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import * as Lock from "../src/Lock.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"

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
})
