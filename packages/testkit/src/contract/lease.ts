/**
 * Contract: the lease in the body, fencing tokens and the scoped acquire.
 *
 * @since 0.2.0
 */
import { assert, type Vitest } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Lease, Lock, LockScripts } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ServerControl } from "./ServerControl.ts"
import { eventually, forkUntilInside, type Reach, reaching, redisKey, uniqueNamespace } from "./support.ts"

type It = Vitest.MethodsNonLive<LockBackend | ServerControl>

const assertIncreasing = (tokens: ReadonlyArray<number>, what: string): void => {
  for (let i = 1; i < tokens.length; i++) {
    if (!(tokens[i]! > tokens[i - 1]!)) {
      assert.fail(`${what}: token ${i} (${tokens[i]}) is not above token ${i - 1} (${tokens[i - 1]})`)
    }
  }
}

export const lease = (it: It, reach: Reach): void => {
  const keys = reaching(it, reach, "keys")
  keys.effect("L1. the body sees its lease: key, fencing token (the fence key's value), validity; check confirms", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "2 seconds" })
      const key = redisKey(lock.namespace, "seen")
      const fenceKey = LockScripts.fenceKey(key)
      const seen = yield* Effect.gen(function* () {
        const lease = yield* Lease.Lease
        return {
          key: lease.key,
          namespace: lease.namespace,
          token: lease.fencingToken,
          onServer: yield* control.get(fenceKey),
          remaining: Duration.toMillis(lease.remaining),
          checked: yield* Effect.exit(lease.check)
        }
      }).pipe(lock.withLock("seen", { waitTimeout: "2 seconds" }))
      assert.strictEqual(seen.key, key)
      assert.strictEqual(seen.namespace, lock.namespace)
      assert.isTrue(Number.isSafeInteger(seen.token) && seen.token > 0, String(seen.token))
      assert.strictEqual(seen.onServer, String(seen.token), "the fence key holds the last token issued")
      assert.isAbove(seen.remaining, 0)
      assert.isAtMost(seen.remaining, 2_000)
      assert.strictEqual(seen.checked._tag, "Success", "the server confirms the owner")
      const retention = yield* control.pttl(fenceKey)
      assert.isAbove(retention, 0, "the fence key outlives the lock, with an expiry")
      assert.isAtMost(retention, LockScripts.fenceRetentionMillis)
    })
  )

  it.effect("L2. fencing tokens strictly increase over 100 acquisitions by 4 clients", () =>
    Effect.gen(function* () {
      const namespace = uniqueNamespace()
      const clients = yield* Effect.forEach([1, 2, 3, 4], () => Lock.make({ namespace, leaseDuration: "2 seconds" }))
      // Bodies are exclusive, so the order in which they record is the order of acquisition.
      const tokens: Array<number> = []
      yield* Effect.forEach(
        clients,
        (client) =>
          Effect.repeat(
            Effect.flatMap(Lease.fencingToken, (token) => Effect.sync(() => tokens.push(token))).pipe(
              client.withLock("shared", { waitTimeout: "20 seconds" })
            ),
            { times: 24 }
          ),
        { concurrency: "unbounded", discard: true }
      )
      assert.strictEqual(tokens.length, 100)
      assertIncreasing(tokens, "in acquisition order")
    })
  )

  keys.effect("L3. tokens keep increasing across key expiry, a retried grant keeps its token, a lost counter", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const backend = yield* LockBackend
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      const key = redisKey(lock.namespace, "crash")
      const first = yield* Lease.fencingToken.pipe(lock.withLock("crash", { waitTimeout: "2 seconds" }))
      // A holder that crashes: its grant is never released, and the key expires.
      const request = { key, token: "crashed-holder", leaseMillis: 300, timeoutMillis: 2_000, acknowledge: false }
      const crashed = yield* backend.acquire(request)
      assert.strictEqual(crashed._tag, "Acquired")
      const crashedToken = crashed._tag === "Acquired" ? crashed.fence : 0
      // Its retry after a lost reply gets the same grant and the same token back.
      assert.deepStrictEqual(yield* backend.acquire(request), crashed)
      yield* eventually(
        "the crashed holder's key expires",
        Effect.map(control.get(key), (value) => value === null)
      )
      const afterExpiry = yield* Lease.fencingToken.pipe(lock.withLock("crash", { waitTimeout: "2 seconds" }))
      // The counter is lost (eviction, a failover that lost it): the server-time floor takes over.
      yield* control.del(LockScripts.fenceKey(key))
      const afterLoss = yield* Lease.fencingToken.pipe(lock.withLock("crash", { waitTimeout: "2 seconds" }))
      assertIncreasing([first, crashedToken, afterExpiry, afterLoss], "first, crashed, after expiry, after loss")
    })
  )

  keys.effect("L4. renewals leave the token unchanged", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      // Renewed every 333 ms. Shorter leases can lose a renewal to a scheduling stall when CI runs
      // every topology at once on two cores (a 400 ms lease did, in contract test 5).
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      const fenceKey = LockScripts.fenceKey(redisKey(lock.namespace, "long"))
      const [before, after, onServer] = yield* Effect.gen(function* () {
        const before = yield* Lease.fencingToken
        yield* Effect.sleep("2500 millis")
        return [before, yield* Lease.fencingToken, yield* control.get(fenceKey)] as const
      }).pipe(lock.withLock("long", { waitTimeout: "2 seconds" }))
      assert.strictEqual(after, before)
      assert.strictEqual(onServer, String(before), "about seven renewals did not issue a token")
    })
  )

  keys.effect("L5. a check the server answers 'not held' fails with LockLost, and so does the call, at once", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      // A long lease: renewal would not notice within this test; the check does.
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "30 seconds" })
      const key = redisKey(lock.namespace, "taken")
      let after = false
      const error = yield* Effect.gen(function* () {
        const lease = yield* Lease.Lease
        yield* lease.check
        yield* control.set(key, "thief", 10_000)
        yield* lease.check
        after = true
        yield* Effect.sleep("20 seconds")
      }).pipe(lock.withLock("taken", { waitTimeout: "2 seconds" }), Effect.flip, Effect.timeout("5 seconds"))
      assert.isFalse(after)
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") assert.strictEqual(error.reason, "ownership")
      assert.strictEqual(yield* control.get(key), "thief", "release never deletes another owner's lock")
    })
  )

  keys.effect("L6. Lock.acquire holds the lock, renewed, until the scope closes, then releases it", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      // As in L4: a 1 s lease rides out scheduling stalls on a loaded machine.
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      const key = redisKey(lock.namespace, "scoped")
      const token = yield* Effect.scoped(
        Effect.gen(function* () {
          const lease = yield* lock.acquire("scoped", { waitTimeout: "2 seconds" })
          yield* Effect.sleep("2200 millis")
          assert.isAbove(yield* control.pttl(key), 0, "renewed past two leases")
          yield* lease.check
          yield* lease.ensure
          return lease.fencingToken
        })
      )
      assert.isNull(yield* control.get(key), "released when the scope closed")
      const next = yield* Lease.fencingToken.pipe(lock.withLock("scoped", { waitTimeout: "1 second" }))
      assert.isAbove(next, token)
    })
  )

  keys.effect("L7. Lock.acquire surfaces loss: lease.lost fails with LockLost when the key is deleted", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "400 millis" })
      const key = redisKey(lock.namespace, "lost")
      const fiber = yield* forkUntilInside((inside) =>
        Effect.scoped(
          Effect.gen(function* () {
            const lease = yield* lock.acquire("lost", { waitTimeout: "2 seconds" })
            yield* inside
            return yield* Effect.raceFirst(Effect.as(Effect.sleep("10 seconds"), "not noticed"), lease.lost)
          })
        ).pipe(Effect.flip)
      )
      yield* control.del(key)
      // Unnoticed, the race would succeed with "not noticed", which the flip turns into a failure.
      const error = yield* Fiber.join(fiber).pipe(Effect.timeout("3 seconds"))
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") assert.strictEqual(error.reason, "ownership")
    })
  )

  keys.effect(
    "L8. a lease longer than a Node timer holds (30 days) is granted, checked and released like any other",
    () =>
      Effect.gen(function* () {
        const control = yield* ServerControl
        // A command's time limit follows the lease; Node fires a timer whose delay does not fit 32
        // bits (about 24.8 days) after 1 ms, with a TimeoutOverflowWarning.
        const overflows: Array<string> = []
        const onWarning = (warning: Error) => {
          if (warning.name === "TimeoutOverflowWarning") overflows.push(warning.message)
        }
        yield* Effect.acquireRelease(
          Effect.sync(() => process.on("warning", onWarning)),
          () => Effect.sync(() => process.off("warning", onWarning))
        )
        const leaseMillis = 30 * 24 * 3600 * 1000
        const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: Duration.millis(leaseMillis) })
        const key = redisKey(lock.namespace, "month")
        const seen = yield* Effect.gen(function* () {
          const lease = yield* Lease.Lease
          yield* lease.check
          return { expiry: yield* control.pttl(key), remaining: Duration.toMillis(lease.remaining) }
        }).pipe(lock.withLock("month", { waitTimeout: Duration.millis(leaseMillis) }))
        assert.isAbove(seen.expiry, leaseMillis - 60_000, "the key's expiry is the lease")
        assert.isAbove(seen.remaining, 25 * 24 * 3600 * 1000)
        assert.isNull(yield* control.get(key), "released")
        // Warnings are emitted on the next tick.
        yield* Effect.sleep("20 millis")
        assert.deepStrictEqual(overflows, [])
      })
  )
}
