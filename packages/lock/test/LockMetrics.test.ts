// The metrics recorded per outcome, read back from an isolated registry.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Lock from "../src/Lock.ts"
import * as LockMetrics from "../src/LockMetrics.ts"
import { busy, scripted } from "./fakeBackend.ts"

const count = (metric: Metric.Counter<number>, attributes: Record<string, string>) =>
  Effect.map(Metric.value(Metric.withAttributes(metric, attributes)), (state) => state.count)

/** The caller's own metric attributes, with `service` added. */
const from = (service: string) => Metric.CurrentMetricAttributes.pipe(Effect.map((own) => ({ ...own, service })))

describe("LockMetrics", () => {
  it.effect("counts acquisitions by outcome, waits, and losses by phase", () =>
    Effect.gen(function* () {
      const free = scripted({})
      const lock = yield* Lock.make({ namespace: "m" }).pipe(Effect.provide(free.layer))
      yield* lock.withLock("a", { waitTimeout: "1 second" })(Effect.void)
      yield* lock.withLock("b", { waitTimeout: "1 second" })(Effect.void)
      const taken = scripted({ acquire: () => busy, release: () => Effect.succeed(false) })
      const other = yield* Lock.make({ namespace: "m" }).pipe(Effect.provide(taken.layer))
      yield* other.tryWithLock("c")(Effect.void)
      const stolen = scripted({ release: () => Effect.succeed(false) })
      const third = yield* Lock.make({ namespace: "m" }).pipe(Effect.provide(stolen.layer))
      yield* Effect.ignore(third.withLock("d", { waitTimeout: "1 second" })(Effect.void))

      assert.strictEqual(yield* count(LockMetrics.acquisitions, { namespace: "m", outcome: "acquired" }), 3)
      assert.strictEqual(yield* count(LockMetrics.acquisitions, { namespace: "m", outcome: "busy" }), 1)
      assert.strictEqual(yield* count(LockMetrics.lost, { namespace: "m", phase: "release" }), 1)
      const waits = yield* Metric.value(Metric.withAttributes(LockMetrics.waitTime, { namespace: "m" }))
      assert.strictEqual(waits.count, 3)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("keeps the caller's own metric attributes beside the lock's, per caller context", () =>
    Effect.gen(function* () {
      const free = scripted({})
      const lock = yield* Lock.make({ namespace: "m" }).pipe(Effect.provide(free.layer))
      const call = (key: string) => lock.withLock(key, { waitTimeout: "1 second" })(Effect.void)
      yield* call("a").pipe(Effect.provideServiceEffect(Metric.CurrentMetricAttributes, from("billing")))
      yield* call("b").pipe(Effect.provideServiceEffect(Metric.CurrentMetricAttributes, from("billing")))
      yield* call("c").pipe(Effect.provideServiceEffect(Metric.CurrentMetricAttributes, from("search")))
      yield* call("d")

      const acquired = { namespace: "m", outcome: "acquired" }
      assert.strictEqual(yield* count(LockMetrics.acquisitions, { ...acquired, service: "billing" }), 2)
      assert.strictEqual(yield* count(LockMetrics.acquisitions, { ...acquired, service: "search" }), 1)
      assert.strictEqual(yield* count(LockMetrics.acquisitions, acquired), 1)
      const waits = yield* Metric.value(
        Metric.withAttributes(LockMetrics.waitTime, { namespace: "m", service: "search" })
      )
      assert.strictEqual(waits.count, 1)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )
})
