// The lease inside the body and the scoped acquire, on the in-memory backend under TestClock (and a
// scripted backend for loss). The same behaviour against real servers is in the contract suite
// (@sage/lock-testkit, contract/lease.ts); the type tests here need no server at all.
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { TestClock } from "effect/testing"
import * as Lease from "../src/Lease.ts"
import * as Lock from "../src/Lock.ts"
import { LockBackend } from "../src/LockBackend.ts"
import type { LockError } from "../src/LockError.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"
import { usableLeaseMillis } from "../src/internal/settings.ts"
import { scripted } from "./fakeBackend.ts"

class Accounts extends Context.Service<Accounts, { readonly debit: Effect.Effect<void> }>()("test/Accounts") {}

// Type tests: checked by the type-checker (`pnpm run check` covers test files), never run: a wrong
// requirement or error type fails the build.
export const typeTests = (client: Lock.LockClient<string>): void => {
  {
    const plain = Effect.succeed(1).pipe(client.withLock("k", { waitTimeout: 1 }))
    expectTypeOf(plain).toEqualTypeOf<Effect.Effect<number, LockError, never>>()
    const withService = Accounts.use((accounts) => accounts.debit).pipe(client.withLock("k", { waitTimeout: 1 }))
    expectTypeOf(withService).toEqualTypeOf<Effect.Effect<void, LockError, Accounts>>()
    const usesLease = Lease.Lease.useSync((lease) => lease.fencingToken).pipe(client.withLock("k", { waitTimeout: 1 }))
    expectTypeOf(usesLease).toEqualTypeOf<Effect.Effect<number, LockError, never>>()
    const both = Effect.all([Lease.fencingToken, Accounts.use((accounts) => accounts.debit)]).pipe(
      client.tryWithLock("k")
    )
    expectTypeOf(both).toEqualTypeOf<Effect.Effect<Option.Option<[number, void]>, LockError, Accounts>>()
    const accessor = Lease.fencingToken.pipe(Lock.withLock("k", { waitTimeout: 1 }))
    expectTypeOf(accessor).toEqualTypeOf<Effect.Effect<number, LockError, Lock.Lock>>()
    const tryAccessor = Effect.void.pipe(Lock.tryWithLock("k"))
    expectTypeOf(tryAccessor).toEqualTypeOf<Effect.Effect<Option.Option<void>, LockError, Lock.Lock>>()
    const scoped = Lock.acquire("k", { waitTimeout: 1 })
    expectTypeOf(scoped).toEqualTypeOf<Effect.Effect<Lease.Handle, LockError, Scope.Scope | Lock.Lock>>()
    // Read alike: both plain values, so neither prints as an Effect's structure when interpolated.
    expectTypeOf<Lease.Handle["remaining"]>().toEqualTypeOf<Duration.Duration>()
    expectTypeOf<Lease.Handle["fencingToken"]>().toEqualTypeOf<number>()
    expectTypeOf(client.acquire("k", { waitTimeout: 1 })).toEqualTypeOf<
      Effect.Effect<Lease.Handle, LockError, Scope.Scope>
    >()
  }
}

describe("Lease in the body (in-memory backend)", () => {
  it.effect("shows the key, namespace, fencing token and remaining validity, renewed as time passes", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ namespace: "acc", leaseDuration: "1 second" })
      const usable = usableLeaseMillis(1_000)
      const seen = yield* Effect.gen(function* () {
        const lease = yield* Lease.Lease
        const first = Duration.toMillis(lease.remaining)
        // Both read as plain values: a log line shows the duration, never an Effect's structure.
        const printed = `${lease.fencingToken} ${lease.remaining}`
        const tokenBefore = lease.fencingToken
        yield* TestClock.adjust("2500 millis")
        const later = Duration.toMillis(lease.remaining)
        yield* lease.ensure
        yield* lease.check
        return { key: lease.key, namespace: lease.namespace, tokenBefore, first, later, printed }
      }).pipe(lock.withLock("k", { waitTimeout: "1 second" }))
      assert.strictEqual(seen.key, "acc:{k}")
      assert.strictEqual(seen.printed, `${seen.tokenBefore} ${seen.first} millis`)
      const tried = yield* Lease.fencingToken.pipe(lock.tryWithLock("k"))
      assert.isTrue(Option.isSome(tried) && tried.value > seen.tokenBefore, "tryWithLock bodies get their lease too")
      assert.strictEqual(seen.namespace, "acc")
      assert.isAbove(seen.tokenBefore, 0)
      assert.strictEqual(seen.first, usable, "a fresh lease can be relied on for the usable lease")
      assert.isAbove(seen.later, 0, "renewed: still valid after 2.5 leases")
      assert.isAtMost(seen.later, usable)
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("fencing tokens increase with every acquisition, across expiry and clients, and stay put on renewal", () =>
    Effect.gen(function* () {
      const backend = yield* LockBackend
      const a = yield* Lock.make({ leaseDuration: "300 millis" })
      const b = yield* Lock.make({ leaseDuration: "300 millis" })
      const tokens: Array<number> = []
      for (let i = 0; i < 20; i++) {
        const client = i % 2 === 0 ? a : b
        tokens.push(yield* Lease.fencingToken.pipe(client.withLock("k", { waitTimeout: "1 second" })))
      }
      // A crashed holder's lease expires; the next holder's token is still higher.
      const crashed = yield* backend.acquire({
        key: "lock:{k}",
        token: "crashed",
        leaseMillis: 300,
        timeoutMillis: 1,
        acknowledge: false
      })
      assert.strictEqual(crashed._tag, "Acquired")
      if (crashed._tag === "Acquired") tokens.push(crashed.fence)
      // Its retry (the same token) gets the same token back.
      const retried = yield* backend.acquire({
        key: "lock:{k}",
        token: "crashed",
        leaseMillis: 300,
        timeoutMillis: 1,
        acknowledge: false
      })
      assert.deepStrictEqual(retried, crashed)
      yield* TestClock.adjust("300 millis")
      const [before, after] = yield* Effect.gen(function* () {
        const first = yield* Lease.fencingToken
        yield* TestClock.adjust("1 second")
        return [first, yield* Lease.fencingToken] as const
      }).pipe(a.withLock("k", { waitTimeout: "1 second" }))
      tokens.push(before)
      assert.strictEqual(after, before, "renewals keep the token")
      for (let i = 1; i < tokens.length; i++) assert.isAbove(tokens[i]!, tokens[i - 1]!, `token ${i}: ${tokens}`)
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("after release the lease says so: ensure and lost fail with reason released, remaining is zero", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make()
      const lease = yield* Lease.Lease.useSync((lease) => lease).pipe(lock.withLock("k", { waitTimeout: "1 second" }))
      assert.strictEqual(Duration.toMillis(lease.remaining), 0)
      const error = yield* Effect.flip(lease.ensure)
      assert.strictEqual(error.reason, "released")
      assert.strictEqual((yield* Effect.flip(lease.lost)).reason, "released")
      const checked = yield* Effect.flip(lease.check)
      assert.isTrue(checked._tag === "LockLost" && checked.reason === "released", "no round trip after release")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )
})

describe("Lease after loss (scripted backend)", () => {
  it.effect("a body that reads its lease after a failed renewal sees the loss", () =>
    Effect.gen(function* () {
      const fake = scripted({ renew: () => Effect.succeed(false) })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      let seen: { reason: string; remaining: number } | undefined
      const fiber = yield* Effect.forkChild(
        Effect.gen(function* () {
          const lease = yield* Lease.Lease
          return yield* Effect.never.pipe(
            Effect.onInterrupt(() =>
              Effect.gen(function* () {
                const error = yield* Effect.flip(lease.ensure)
                seen = { reason: error.reason, remaining: Duration.toMillis(lease.remaining) }
              })
            )
          )
        }).pipe(lock.withLock("k", { waitTimeout: "1 second" }), Effect.flip)
      )
      yield* TestClock.adjust("100 millis")
      yield* TestClock.adjust("100 millis")
      // The body's value type is void (it never returns), so the flipped error is widened with it.
      const error = (yield* Fiber.join(fiber)) as LockError
      assert.strictEqual(error._tag, "LockLost")
      assert.deepStrictEqual(seen, { reason: "ownership", remaining: 0 })
    })
  )

  it.effect("a loss stays a typed LockLost when a finalizer of the interrupted body dies", () =>
    Effect.gen(function* () {
      const fake = scripted({ renew: () => Effect.succeed(false) })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(
        Effect.never.pipe(
          Effect.ensuring(Effect.die("the finalizer broke")),
          lock.withLock("k", { waitTimeout: "1 second" }),
          Effect.exit
        )
      )
      yield* TestClock.adjust("100 millis")
      yield* TestClock.adjust("100 millis")
      const exit = yield* Fiber.join(fiber)
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = Cause.findErrorOption(exit.cause)
        assert.isTrue(Option.isSome(error) && error.value._tag === "LockLost", String(exit.cause))
        assert.isTrue(exit.cause.reasons.some(Cause.isDieReason), "the defect is kept beside it")
        assert.isFalse(Cause.hasInterrupts(exit.cause), "not reported as an interruption")
      }
    })
  )

  it.effect("a check the server answers 'not held' is a loss: LockLost, the lease ends, the call fails", () =>
    Effect.gen(function* () {
      const fake = scripted({ check: () => Effect.succeed(false) })
      const lock = yield* Lock.make({ leaseDuration: "30 seconds" }).pipe(Effect.provide(fake.layer))
      let after = false
      const error = yield* Effect.gen(function* () {
        const lease = yield* Lease.Lease
        yield* lease.check
        after = true
      }).pipe(lock.withLock("k", { waitTimeout: "1 second" }), Effect.flip)
      assert.isFalse(after, "nothing after a failed check runs")
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") assert.strictEqual(error.reason, "ownership")
    })
  )
})

describe("Lock.acquire (scoped)", () => {
  it.effect("holds and renews until the scope closes, then releases", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ leaseDuration: "300 millis" })
      const other = yield* Lock.make({ leaseDuration: "300 millis" })
      const scope = yield* Scope.make()
      const lease = yield* lock.acquire("k", { waitTimeout: "1 second" }).pipe(Scope.provide(scope))
      assert.strictEqual(lease.key, "lock:{k}")
      yield* TestClock.adjust("2 seconds")
      assert.isTrue(Option.isNone(yield* other.tryWithLock("k")(Effect.void)), "still held after ~7 leases")
      assert.isAbove(Duration.toMillis(lease.remaining), 0)
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(yield* other.tryWithLock("k")(Effect.succeed(1)), Option.some(1), "released on close")
      assert.strictEqual((yield* Effect.flip(lease.ensure)).reason, "released")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("fails like withLock when the lock stays busy: TimedOut, nothing held", () =>
    Effect.gen(function* () {
      const holder = yield* Lock.make()
      const lock = yield* Lock.make()
      yield* Effect.forkChild(holder.withLock("k", { waitTimeout: "1 second" })(Effect.never))
      yield* Effect.yieldNow
      const fiber = yield* Effect.forkChild(Effect.scoped(Effect.flip(lock.acquire("k", { waitTimeout: "2 seconds" }))))
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(fiber))._tag, "TimedOut")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a scope closed while the acquisition waits ends the acquisition instead of leaving it hanging", () =>
    Effect.gen(function* () {
      const holder = yield* Lock.make()
      const lock = yield* Lock.make()
      yield* Effect.forkChild(holder.withLock("k", { waitTimeout: "1 second" })(Effect.never))
      yield* Effect.yieldNow
      const scope = yield* Scope.make()
      const fiber = yield* Effect.forkChild(lock.acquire("k", { waitTimeout: "1 minute" }).pipe(Scope.provide(scope)))
      yield* TestClock.adjust("1 second")
      assert.isUndefined(fiber.pollUnsafe(), "still waiting for the busy lock")
      yield* Scope.close(scope, Exit.void)
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.hasInterrupts(exit), String(exit))
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a loss fails lease.lost with LockLost for whoever races against it", () =>
    Effect.gen(function* () {
      const fake = scripted({ renew: () => Effect.succeed(false) })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const fiber = yield* Effect.forkChild(
        Effect.scoped(
          Effect.gen(function* () {
            const lease = yield* lock.acquire("k", { waitTimeout: "1 second" })
            return yield* Effect.raceFirst(Effect.as(Effect.sleep("10 seconds"), "finished"), lease.lost)
          })
        ).pipe(Effect.flip)
      )
      yield* TestClock.adjust("100 millis")
      yield* TestClock.adjust("100 millis")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") assert.strictEqual(error.phase, "renew")
      assert.strictEqual(fake.calls.release.length, 1, "released (attempted) once")
    })
  )

  it.effect("a loss nobody watches interrupts the fiber that acquired; interruptOnLoss: false leaves it running", () =>
    Effect.gen(function* () {
      const fake = scripted({ renew: () => Effect.succeed(false) })
      const lock = yield* Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provide(fake.layer))
      const work = (interruptOnLoss: boolean) =>
        Effect.scoped(
          Effect.gen(function* () {
            const lease = yield* lock.acquire("k" + interruptOnLoss, { waitTimeout: "1 second", interruptOnLoss })
            // Someone watched `lost` earlier and stopped: at the loss, nobody is watching.
            yield* Effect.timeoutOption(lease.lost, "10 millis")
            yield* Effect.sleep("1 second")
            return (yield* Effect.flip(lease.ensure)).reason
          })
        )
      const interrupted = yield* Effect.forkChild(work(true))
      const kept = yield* Effect.forkChild(work(false))
      yield* TestClock.adjust("10 millis")
      yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.await(interrupted)
      assert.isTrue(Exit.hasInterrupts(exit), String(exit))
      assert.strictEqual(yield* Fiber.join(kept), "ownership", "not interrupted, and the lease shows the loss")
    })
  )
})
