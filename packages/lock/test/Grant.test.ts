// The client's rules for a lock handed over by a release (a granting backend), under TestClock: when a
// grant is relied on as it comes, and when the waiter asks the server instead. What the scripts do
// on real servers is in packages/node-redis/test/Grant.test.ts.
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { TestClock } from "effect/testing"
import * as Lease from "../src/Lease.ts"
import * as Lock from "../src/Lock.ts"
import type { AcquireReply, Granted } from "../src/LockBackend.ts"
import { grantingWaiterPrefix } from "../src/LockScripts.ts"
import { scripted, temporary } from "./fakeBackend.ts"

/** A busy reply that registered the waiter; the last fence issued before it was 100. */
const busyAfter100: Effect.Effect<AcquireReply> = Effect.succeed({
  _tag: "Busy",
  remainingMillis: 10_000,
  fenceFloor: 100
})

const grant = (waiterId: string, fence: number): Granted => ({
  _tag: "Granted",
  token: `${waiterId}:${fence}`,
  fence,
  leaseMillis: 500
})

/**
 * A granting backend: the first attempt is busy (fence floor 100), later ones acquire with `fence`;
 * the first wait for a turn ends with `firstWait`, later waits never end.
 */
const granting = (fence: number, firstWait: (waiterId: string) => Effect.Effect<boolean | Granted>) =>
  scripted({
    acquire: (_request, attempt) => (attempt === 1 ? busyAfter100 : Effect.succeed({ _tag: "Acquired", fence })),
    leave: () => Effect.void,
    grants: true,
    await: (_key, waiterId, _millis, call) => (call === 1 ? firstWait(waiterId) : Effect.never)
  })

/** Runs `withLock` on "k" with a body of `bodyMillis`, moving the clock 10 ms at a time; the body's fence. */
const fenceSeen = (lock: Lock.LockClient<string>, bodyMillis: number, totalMillis: number) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(
      lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.andThen(Effect.sleep(bodyMillis), Lease.fencingToken))
    )
    for (let t = 0; t < totalMillis; t += 10) yield* TestClock.adjust("10 millis")
    return yield* Fiber.join(fiber)
  })

// A granting backend whose fences follow the server's clock. The busy reply's floor is the server's time then (5 s, in microseconds); the grant's fence is
// the server's time at the release. The message comes 350 ms after the busy attempt was sent,
// later than a grant counted from that attempt could be taken as it comes.
const timed = (fence: number) => {
  const renewedAt: Array<number> = []
  const fake = scripted({
    acquire: (_request, attempt) =>
      attempt === 1
        ? Effect.succeed({ _tag: "Busy", remainingMillis: 10_000, fenceFloor: 5_000_000 })
        : Effect.succeed({ _tag: "Acquired", fence }),
    renew: () => Effect.map(Clock.currentTimeMillis, (now) => (renewedAt.push(now), true)),
    leave: () => Effect.void,
    grants: true,
    await: (_key, waiterId, _millis, call) =>
      call === 1 ? Effect.as(Effect.sleep("350 millis"), grant(waiterId, fence)) : Effect.never
  })
  return { fake, renewedAt }
}

describe("release grants (client rules)", () => {
  it.effect("a fresh grant is held as it comes, renewed within its claim window, and released under its token", () =>
    Effect.gen(function* () {
      const renewedAt: Array<number> = []
      const fake = scripted({
        acquire: () => busyAfter100,
        renew: () => Effect.map(Clock.currentTimeMillis, (now) => (renewedAt.push(now), true)),
        leave: () => Effect.void,
        grants: true,
        await: (_key, waiterId, _millis, call) => (call === 1 ? Effect.succeed(grant(waiterId, 101)) : Effect.never)
      })
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      const fence = yield* fenceSeen(lock, 400, 500)
      const waiterId = fake.calls.waiterIds[0]!
      assert.isTrue(waiterId.startsWith(grantingWaiterPrefix), waiterId)
      assert.strictEqual(fence, 101, "the grant's fence")
      assert.strictEqual(fake.calls.acquire.length, 1, "no attempt after the busy one")
      // The grant lasts 500 ms from the release, which ran after the busy attempt was sent (t = 0).
      assert.isAtLeast(renewedAt.length, 1)
      assert.isAtMost(renewedAt[0]!, 200, "renewed a third into the claim window")
      for (const request of fake.calls.renew) {
        assert.strictEqual(request.token, `${waiterId}:101`)
        assert.strictEqual(request.leaseMillis, 10_000, "to the lock's own lease")
      }
      assert.deepStrictEqual(
        fake.calls.release.map((request) => request.token),
        [`${waiterId}:101`]
      )
    })
  )

  it.effect("a grant not newer than the busy reply's fence floor is not relied on: the waiter asks again", () =>
    Effect.gen(function* () {
      const fake = granting(102, (waiterId) => Effect.succeed(grant(waiterId, 100)))
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(yield* fenceSeen(lock, 10, 50), 102)
      assert.strictEqual(fake.calls.acquire.length, 2)
      assert.strictEqual(fake.calls.release[0]!.token, fake.calls.acquire[1]!.token, "held under its own token")
    })
  )

  it.effect("a grant that leaves too little of its window to renew is taken by an acquire instead", () =>
    Effect.gen(function* () {
      // The grant comes 350 ms after the busy attempt was sent: under 150 ms of its 473 usable ms are left.
      const fake = granting(101, (waiterId) => Effect.as(Effect.sleep("350 millis"), grant(waiterId, 101)))
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(yield* fenceSeen(lock, 10, 400), 101)
      assert.strictEqual(fake.calls.acquire.length, 2, "the acquire took the granted key")
      assert.strictEqual(fake.calls.release[0]!.token, fake.calls.acquire[1]!.token)
    })
  )

  it.effect("a grant waited for over a third of its window's usable part is taken by an acquire, for a margin", () =>
    Effect.gen(function* () {
      // 200 ms after the busy attempt, 273 of the window's 473 usable ms would be left for the first
      // renewal's round trip: a stall of that much would stop the body. An acquire takes the key
      // with the lock's full lease instead.
      const fake = granting(101, (waiterId) => Effect.as(Effect.sleep("200 millis"), grant(waiterId, 101)))
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(yield* fenceSeen(lock, 10, 250), 101)
      assert.strictEqual(fake.calls.acquire.length, 2, "the acquire took the granted key")
      assert.strictEqual(fake.calls.release[0]!.token, fake.calls.acquire[1]!.token)
    })
  )

  describe("a grant whose fence follows the server's clock counts from the release, not from the busy attempt", () => {
    it.effect("released 340 ms after the busy reply: held as it comes, first renewed a third into its window", () =>
      Effect.gen(function* () {
        const { fake, renewedAt } = timed(5_340_000)
        const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
        assert.strictEqual(yield* fenceSeen(lock, 400, 800), 5_340_000)
        assert.strictEqual(fake.calls.acquire.length, 1, "no attempt after the busy one")
        // Counted from 339 ms (the difference less the floor's rounding): due at 339 + 166.
        assert.isAtLeast(renewedAt.length, 1)
        assert.isAtLeast(renewedAt[0]!, 500, "not renewed before it was due")
        assert.isAtMost(renewedAt[0]!, 520, "renewed when due")
      })
    )

    it.effect("a fence that claims more time than has passed here is not trusted: counted from the busy attempt", () =>
      Effect.gen(function* () {
        // 900 ms of server time between the busy reply and the release, 350 ms here: counted from the
        // busy attempt, the grant is too old to take as it comes, and an acquire takes the key.
        const { fake } = timed(5_900_000)
        const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
        assert.strictEqual(yield* fenceSeen(lock, 10, 400), 5_900_000)
        assert.strictEqual(fake.calls.acquire.length, 2, "the acquire took the granted key")
      })
    )
  })

  it.effect("a grant's first renewal is sent when due, even while the renewal loop sleeps for another lease", () =>
    Effect.gen(function* () {
      const renewedAt: Array<{ readonly key: string; readonly at: number }> = []
      let busyAt = 0
      const fake = scripted({
        acquire: (request) =>
          request.key.endsWith("{other}")
            ? Effect.succeed({ _tag: "Acquired", fence: 1 })
            : Effect.andThen(Clock.currentTimeMillis, (now) => ((busyAt = now), busyAfter100)),
        renew: (request) =>
          Effect.map(Clock.currentTimeMillis, (now) => (renewedAt.push({ key: request.key, at: now }), true)),
        leave: () => Effect.void,
        grants: true,
        await: (_key, waiterId, _millis, call) =>
          call === 1 ? Effect.as(Effect.sleep("100 millis"), grant(waiterId, 101)) : Effect.never
      })
      // A 10 s lease: renewals every 3,333 ms, batched within 833 ms of each other.
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      const other = yield* Effect.forkChild(
        lock.withLock("other", { waitTimeout: "1 second" })(Effect.sleep("5 seconds"))
      )
      // The loop sleeps until "other" is due, at 3,333 ms. The waiter is busy at 2,870 ms and granted
      // at 2,970: that grant is usable until 2,870 + 473 = 3,343 and due for renewal at once. Waking
      // at the planned 3,333 would leave it 10 ms for the round trip.
      for (let t = 0; t < 2_870; t += 10) yield* TestClock.adjust("10 millis")
      const waiter = yield* Effect.forkChild(
        lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.sleep("400 millis"))
      )
      for (let t = 0; t < 600; t += 10) yield* TestClock.adjust("10 millis")
      yield* Fiber.join(waiter)
      const granted = renewedAt.filter((renewal) => renewal.key.endsWith("{k}"))
      assert.strictEqual(busyAt, 2_870)
      assert.isAtLeast(granted.length, 1)
      assert.isAtMost(granted[0]!.at - busyAt, 250, "renewed within a quarter of its margin after it was due")
      yield* Fiber.interrupt(other)
    })
  )

  it.effect("after an attempt that failed, a grant is not relied on as it comes, whatever its fence", () =>
    Effect.gen(function* () {
      const fake = scripted({
        acquire: (_request, attempt) =>
          attempt === 1
            ? busyAfter100
            : attempt === 2
              ? Effect.fail(temporary())
              : Effect.succeed({ _tag: "Acquired", fence: 103 }),
        leave: () => Effect.void,
        grants: true,
        // The first wait times out (the second attempt then fails); the second brings a grant.
        await: (_key, waiterId, _millis, call) =>
          call === 1 ? Effect.succeed(false) : call === 2 ? Effect.succeed(grant(waiterId, 101)) : Effect.never
      })
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(yield* fenceSeen(lock, 10, 1_500), 103)
      assert.strictEqual(fake.calls.acquire.length, 3)
    })
  )

  it.effect("over a backend that does not grant, waiter ids carry no granting prefix", () =>
    Effect.gen(function* () {
      const fake = scripted({
        acquire: (_request, attempt) => (attempt === 1 ? busyAfter100 : Effect.succeed({ _tag: "Acquired", fence: 7 })),
        leave: () => Effect.void,
        await: () => Effect.succeed(true)
      })
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provide(fake.layer))
      assert.strictEqual(yield* fenceSeen(lock, 10, 50), 7)
      assert.isFalse(fake.calls.waiterIds[0]!.startsWith(grantingWaiterPrefix))
    })
  )
})
