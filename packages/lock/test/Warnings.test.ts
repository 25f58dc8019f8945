// The warnings about releases that did not go as planned come in waves (thousands of bodies ending
// at once on an overloaded process): a client logs ten a second one by one and sums up the rest.
// Over the in-memory backend under TestClock, with releases held up until after the lease, or
// renewals that find every key taken.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import { TestClock } from "effect/testing"
import * as Lock from "../src/Lock.ts"
import { LockBackend } from "../src/LockBackend.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"

const late = "expired before its release reached the server"

/** A logger that keeps the warnings' messages. */
const warningsLogger = () => {
  const warnings: Array<string> = []
  const logger = Logger.make((options) => {
    if (options.logLevel === "Warn") warnings.push(String(options.message))
  })
  return { warnings, layer: Logger.layer([logger]) }
}

// A client with a 300 ms lease whose releases reach the backend 400 ms after they are sent, and
// the warnings it logs.
const lateReleases = Effect.gen(function* () {
  const memory = yield* MemoryBackend.make
  const lock = yield* Lock.make({ namespace: "waves", leaseDuration: "300 millis" }).pipe(
    Effect.provideService(LockBackend, {
      ...memory,
      release: (request) => Effect.andThen(Effect.sleep("400 millis"), memory.release(request))
    })
  )
  const { warnings, layer } = warningsLogger()
  // `count` calls on keys of their own, all at once; their results once the releases replied.
  const wave = (count: number, prefix: string) =>
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(
        Effect.forEach(
          Array.from({ length: count }, (_, i) => `${prefix}-${i}`),
          (key) => lock.withLock(key, { waitTimeout: "1 second" })(Effect.succeed(key)),
          { concurrency: "unbounded" }
        ).pipe(Effect.provide(layer))
      )
      yield* TestClock.adjust("500 millis")
      return yield* Fiber.join(fiber)
    })
  return { wave, warnings }
})

describe("release warnings", () => {
  it.effect("a wave logs ten one by one, and the rest once, as a count, when the second ends", () =>
    Effect.gen(function* () {
      const { wave, warnings } = yield* lateReleases
      const values = yield* wave(25, "a")
      assert.strictEqual(values.length, 25, "every call returns its value: the lease freed each key")
      assert.strictEqual(warnings.length, 10, `ten logged one by one: ${JSON.stringify(warnings)}`)
      assert.isTrue(warnings.every((message) => message.includes(late)))

      yield* TestClock.adjust("1 second")
      assert.strictEqual(warnings.length, 11, `then one summary: ${JSON.stringify(warnings)}`)
      const summary = warnings[10]!
      assert.include(summary, `namespace "waves"`)
      assert.include(summary, "15 more warnings were not logged in the last second")
      assert.include(
        summary,
        "releases that reached the server after the lease ran out (nobody held the lock in between): 15"
      )
      assert.match(summary, /: 15 \(the first for lock waves:\{a-\d+\}\)$/)

      // A new second has a new budget, and nothing is left to sum up.
      yield* wave(3, "b")
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(warnings.length, 14, `three more, one by one: ${JSON.stringify(warnings)}`)
      assert.isTrue(warnings.slice(11).every((message) => message.includes(late) && message.includes("waves:{b-")))
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a few late releases are each logged, with no summary", () =>
    Effect.gen(function* () {
      const { wave, warnings } = yield* lateReleases
      yield* wave(10, "c")
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(warnings.length, 10, JSON.stringify(warnings))
      assert.isFalse(warnings.some((message) => message.includes("not logged")))
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("locks held by scopes and lost together: ten logged, the rest summed up", () =>
    Effect.gen(function* () {
      const memory = yield* MemoryBackend.make
      let taken = false
      const lock = yield* Lock.make({ namespace: "scopes", leaseDuration: "300 millis" }).pipe(
        Effect.provideService(LockBackend, {
          ...memory,
          // The in-memory backend renews lease by lease (it has no `renewAll`).
          renew: (request) => (taken ? Effect.succeed(false) : memory.renew(request))
        })
      )
      const { warnings, layer } = warningsLogger()
      const scope = yield* Scope.make()
      for (let i = 0; i < 15; i++) {
        yield* lock
          .acquire(`s-${i}`, { waitTimeout: "1 second", interruptOnLoss: false })
          .pipe(Effect.provide(layer), Scope.provide(scope))
      }
      taken = true
      yield* TestClock.adjust("300 millis")
      assert.strictEqual(warnings.length, 10, `ten logged one by one: ${JSON.stringify(warnings)}`)
      assert.isTrue(warnings.every((message) => message.includes("held by a scope was lost before the scope closed")))
      yield* TestClock.adjust("1 second")
      assert.strictEqual(warnings.length, 11, JSON.stringify(warnings))
      assert.include(
        warnings[10]!,
        "locks held by a scope that were lost before the scope closed: 5 (the first for lock scopes:{s-10})"
      )
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(MemoryBackend.layer))
  )
})
