// A client keeps at most `attemptSlotsPerClient` acquire attempts on the wire: a burst of calls goes
// out a few hundred at a time, each lease counting from its own send; a call waiting for a slot still
// ends at its waitTimeout; and attempts stuck on a server that does not answer hold nobody up for
// longer than `stallMillis`. Live clock: slot waits run on real timers (see attemptSlots.ts).
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Lock from "../src/Lock.ts"
import type { AcquireReply } from "../src/LockBackend.ts"
import { attemptSlotsPerClient, make as makeSlots } from "../src/internal/attemptSlots.ts"
import { scripted } from "./fakeBackend.ts"

const burst = attemptSlotsPerClient + 44

/**
 * A fake whose acquire replies wait for `open` (except for keys `free...`, answered at once), counting
 * the attempts on the wire at once.
 */
const gated = (open: Deferred.Deferred<void>) => {
  let onWire = 0
  let mostOnWire = 0
  const fake = scripted({
    acquire: (request) =>
      Effect.suspend(() => {
        if (request.key.includes("{free")) return Effect.succeed<AcquireReply>({ _tag: "Acquired", fence: 1 })
        mostOnWire = Math.max(mostOnWire, ++onWire)
        return Deferred.await(open).pipe(
          Effect.as<AcquireReply>({ _tag: "Acquired", fence: 1 }),
          Effect.ensuring(Effect.sync(() => onWire--))
        )
      })
  })
  return { fake, mostOnWire: () => mostOnWire, onWire: () => onWire }
}

/** `count` calls at once on keys `<prefix>0`, `<prefix>1`, ..., each running `body` with the lock. */
const callAll = <A>(
  lock: Lock.LockClient<string>,
  count: number,
  prefix: string,
  body: (i: number) => Effect.Effect<A>
) =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => i),
    (i) => lock.withLock(`${prefix}${i}`, { waitTimeout: "20 seconds" })(body(i)),
    { concurrency: "unbounded" }
  )

describe("attempt slots", () => {
  it.live(
    "a burst of calls on distinct keys keeps at most the client's slots on the wire, and all get their lock",
    () =>
      Effect.gen(function* () {
        const open = yield* Deferred.make<void>()
        const { fake, mostOnWire } = gated(open)
        const lock = yield* Lock.make({ leaseDuration: "30 seconds" }).pipe(Effect.provide(fake.layer))
        const calls = yield* Effect.forkChild(callAll(lock, burst, "k", Effect.succeed))
        yield* Effect.sleep(10)
        assert.strictEqual(fake.calls.acquire.length, attemptSlotsPerClient, "the rest wait for a slot, unsent")
        yield* Deferred.succeed(open, undefined)
        const values = yield* Fiber.join(calls)
        assert.strictEqual(values.length, burst)
        assert.strictEqual(fake.calls.acquire.length, burst)
        assert.strictEqual(mostOnWire(), attemptSlotsPerClient)
      })
  )

  it.live(
    "attempts stuck on a server that does not answer hold other calls up for about stallMillis, not their waitTimeout",
    () =>
      Effect.gen(function* () {
        const open = yield* Deferred.make<void>()
        const { fake } = gated(open)
        const lock = yield* Lock.make({ leaseDuration: "30 seconds" }).pipe(Effect.provide(fake.layer))
        const stuck = yield* Effect.forkChild(callAll(lock, attemptSlotsPerClient, "k", () => Effect.void))
        yield* Effect.sleep(10)
        assert.strictEqual(fake.calls.acquire.length, attemptSlotsPerClient, "every slot is taken")
        const started = Date.now()
        const value = yield* lock.withLock("free", { waitTimeout: "10 seconds" })(Effect.succeed("done"))
        const waited = Date.now() - started
        assert.strictEqual(value, "done")
        assert.isBelow(waited, 3_000, "then went without one, long before its waitTimeout")
        yield* Deferred.succeed(open, undefined)
        yield* Fiber.join(stuck)
      })
  )

  it.live("slots of interrupted calls, waiting or on the wire, go back to the client", () =>
    Effect.gen(function* () {
      const open = yield* Deferred.make<void>()
      const { fake, onWire } = gated(open)
      const lock = yield* Lock.make({ leaseDuration: "30 seconds" }).pipe(Effect.provide(fake.layer))
      const doomed = yield* Effect.forkChild(callAll(lock, burst, "k", () => Effect.void))
      yield* Effect.sleep(100)
      yield* Fiber.interrupt(doomed)
      assert.strictEqual(onWire(), 0, "the interrupted attempts were abandoned")
      // Every slot is free again: a new burst gets them all at once.
      const before = fake.calls.acquire.length
      yield* Deferred.succeed(open, undefined)
      const again = yield* callAll(lock, attemptSlotsPerClient, "again", Effect.succeed)
      assert.lengthOf(again, attemptSlotsPerClient)
      assert.strictEqual(fake.calls.acquire.length - before, attemptSlotsPerClient)
    })
  )

  it.live("a slot handed to a waiter that is interrupted meanwhile is given back", () =>
    Effect.gen(function* () {
      const slots = makeSlots(1, 10_000)
      const first = { slot: false }
      const second = { slot: false }
      const third = { slot: false }
      assert.isTrue(slots.take(first))
      assert.isFalse(slots.take(second))
      const waiting = yield* Effect.forkChild(slots.wait(second, 10_000))
      yield* Effect.yieldNow
      slots.give(first)
      assert.isTrue(second.slot, "handed to the waiter")
      yield* Fiber.interrupt(waiting)
      // Its owner gives it back when it settles, whatever happened to the wait.
      slots.give(second)
      assert.strictEqual(slots.inUse(), 0)
      assert.isTrue(slots.take(third))
      const late = { slot: false }
      assert.strictEqual(yield* slots.wait(late, 20), "timedOut", "no slot within the wait")
      assert.isFalse(late.slot)
      slots.give(third)
      assert.strictEqual(slots.inUse(), 0)
    })
  )

  it.live(
    "a wait ends stalled when no slot comes free for the stall period, and only as many as there are slots go",
    () =>
      Effect.gen(function* () {
        const slots = makeSlots(2, 100)
        const holders = [{ slot: false }, { slot: false }]
        for (const holder of holders) assert.isTrue(slots.take(holder))
        const waiters = Array.from({ length: 5 }, () => ({ slot: false }))
        const waits = yield* Effect.forkChild(
          Effect.forEach(waiters, (waiter) => slots.wait(waiter, 10_000), { concurrency: "unbounded" })
        )
        yield* Effect.sleep(150)
        // After one quiet period two went (as many as there are slots); the rest wait for the next.
        assert.isUndefined(waits.pollUnsafe())
        const outcomes = yield* Fiber.join(waits)
        assert.deepStrictEqual(outcomes, ["stalled", "stalled", "stalled", "stalled", "stalled"])
        assert.isTrue(
          waiters.every((waiter) => !waiter.slot),
          "they go without a slot"
        )
        assert.strictEqual(slots.inUse(), 2)
      })
  )
})
