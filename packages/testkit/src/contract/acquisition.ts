/**
 * Contract: acquisition. Waiting, budgets, `tryWithLock`, failure classification, keys, namespaces,
 * argument validation, reentrancy and interruption of waiters (issue items 1-4 and 7-9).
 *
 * @since 0.1.0
 */
import { assert, type Vitest } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { KeyCodec, Lock, LockScripts } from "@sage/lock"
import type { LockBackend } from "@sage/lock/LockBackend"
import { ServerControl } from "./ServerControl.ts"
import { eventually, forkUntilInside, now, type Reach, reaching, redisKey, uniqueNamespace } from "./support.ts"

type It = Vitest.MethodsNonLive<LockBackend | ServerControl>

export const acquisition = (it: It, reach: Reach): void => {
  const keys = reaching(it, reach, "keys")
  const server = reaching(it, reach, "server")
  keys.effect("1. withLock waits for a busy lock and returns the body's value after release", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      // Two clients, as two processes would be: their only coordination is the server's lock.
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "2 seconds" })
      const other = yield* Lock.make({ namespace: lock.namespace, leaseDuration: "2 seconds" })
      const key = redisKey(lock.namespace, "account:42")
      let holderLeftAt = 0
      const holder = yield* forkUntilInside((inside) =>
        inside.pipe(
          Effect.andThen(Effect.sleep(300)),
          Effect.andThen(Effect.flatMap(now, (t) => Effect.sync(() => (holderLeftAt = t)))),
          lock.withLock("account:42", { waitTimeout: "1 second" })
        )
      )
      let waiterEnteredAt = 0
      const value = yield* Effect.gen(function* () {
        waiterEnteredAt = yield* now
        assert.isNotNull(yield* control.get(key), "the key holds the waiter's token while its body runs")
        return "balance updated"
      }).pipe(other.withLock("account:42", { waitTimeout: "5 seconds" }))
      yield* Fiber.join(holder)
      assert.strictEqual(value, "balance updated")
      assert.isAtLeast(waiterEnteredAt, holderLeftAt, "the waiter entered only after the holder left")
      assert.isNull(yield* control.get(key), "the lock is released when withLock returns")
    })
  )

  keys.effect("2. waitTimeout bounds acquisition: TimedOut, body not started, nothing left held", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "5 seconds" })
      const key = redisKey(lock.namespace, "busy")
      yield* control.set(key, "someone-else", 5_000)
      let ran = false
      const start = yield* now
      const error = yield* Effect.sync(() => (ran = true)).pipe(
        lock.withLock("busy", { waitTimeout: "400 millis" }),
        Effect.flip
      )
      const elapsed = (yield* now) - start
      assert.strictEqual(error._tag, "TimedOut")
      if (error._tag === "TimedOut") {
        assert.strictEqual(error.reason, "busy")
        // How often it asked depends on the wake-ups (a waiter woken by nobody asks once more at
        // most when its safety-net poll comes due), not on the contract: at least once.
        assert.isAtLeast(error.attempts, 1, "it asked")
      }
      assert.isFalse(ran, "the body did not run")
      assert.isAtLeast(elapsed, 390, "it waited for the whole budget")
      assert.isBelow(elapsed, 400 + 2_000, "it did not wait much past the budget")
      assert.strictEqual(yield* control.get(key), "someone-else", "the other holder's lock is untouched")
    })
  )

  server.effect("2. a server that stops answering cannot stretch waitTimeout, and cleanup adds at most ~1 s", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "3 seconds" })
      const key = redisKey(lock.namespace, "frozen")
      yield* control.pause(key)
      const start = yield* now
      const exit = yield* Effect.void
        .pipe(lock.withLock("frozen", { waitTimeout: "500 millis" }), Effect.flip)
        .pipe(Effect.ensuring(control.resume(key)))
      const elapsed = (yield* now) - start
      assert.strictEqual(exit._tag, "TimedOut")
      if (exit._tag === "TimedOut") assert.strictEqual(exit.reason, "unavailable")
      assert.isBelow(elapsed, 500 + 1_000 + 1_000, "deadline plus at most one second of cleanup (plus margin)")
      // The abandoned attempt may have been applied when the server resumed; its cleanup release or
      // its lease frees the key, so another caller gets it within one lease.
      const got = yield* Effect.succeed("ok").pipe(lock.withLock("frozen", { waitTimeout: "5 seconds" }))
      assert.strictEqual(got, "ok")
    })
  )

  it.effect("2. waitTimeout must be finite and positive: InvalidArgument names the field and value", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ namespace: uniqueNamespace() })
      for (const waitTimeout of [0, -1, Number.NaN, "Infinity", "soon", "-2 seconds"]) {
        const error = yield* Effect.void.pipe(lock.withLock("k", { waitTimeout: waitTimeout as never }), Effect.flip)
        assert.strictEqual(error._tag, "InvalidArgument", `waitTimeout ${String(waitTimeout)}`)
        if (error._tag === "InvalidArgument") {
          assert.strictEqual(error.field, "waitTimeout")
          assert.include(error.message, "waitTimeout")
        }
      }
    })
  )

  keys.effect("3. tryWithLock: busy gives None without running the body; free gives Some after release", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "2 seconds" })
      const key = redisKey(lock.namespace, "cron")
      yield* control.set(key, "other", 2_000)
      let ran = 0
      const start = yield* now
      const busy = yield* Effect.sync(() => ++ran).pipe(lock.tryWithLock("cron"))
      assert.isTrue(Option.isNone(busy))
      assert.strictEqual(ran, 0)
      assert.isBelow((yield* now) - start, 500, "a busy lock is not waited for")
      yield* control.del(key)
      const free = yield* Effect.sync(() => ++ran).pipe(lock.tryWithLock("cron"))
      assert.deepStrictEqual(free, Option.some(1))
      assert.isNull(yield* control.get(key), "released after the body")
    })
  )

  server.effect("3. tryWithLock retries an unavailable server for about one second, then TimedOut", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "5 seconds" })
      const key = redisKey(lock.namespace, "outage")
      yield* control.pause(key)
      const start = yield* now
      const error = yield* Effect.void.pipe(
        lock.tryWithLock("outage"),
        Effect.flip,
        Effect.ensuring(control.resume(key))
      )
      const elapsed = (yield* now) - start
      assert.strictEqual(error._tag, "TimedOut")
      assert.isAtLeast(elapsed, 900)
      assert.isBelow(elapsed, 1_000 + 1_000 + 1_000)
    })
  )

  server.effect("4. a non-retryable server error fails at once with the typed LockRedisError naming the reply", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace() })
      const key = redisKey(lock.namespace, "wrongtype")
      yield* control.command(key, "LPUSH", key, "x")
      const start = yield* now
      const error = yield* Effect.void.pipe(lock.withLock("wrongtype", { waitTimeout: "5 seconds" }), Effect.flip)
      assert.strictEqual(error._tag, "LockRedisError")
      if (error._tag === "LockRedisError") {
        assert.strictEqual(error.code, "WRONGTYPE")
        assert.isFalse(error.retryable)
      }
      assert.isBelow((yield* now) - start, 1_000, "not retried until the budget ran out")
    })
  )

  server.effect(
    "4. a script that fails after its first write leaves nothing held (the fence key is of another type)",
    () =>
      Effect.gen(function* () {
        const control = yield* ServerControl
        const lock = yield* Lock.make({ namespace: uniqueNamespace() })
        const key = redisKey(lock.namespace, "fence-type")
        // The acquire script sets the lock key, then finds the fence key (same hash tag) is a list.
        yield* control.command(key, "LPUSH", LockScripts.fenceKey(key), "x")
        const error = yield* Effect.void.pipe(lock.withLock("fence-type", { waitTimeout: "5 seconds" }), Effect.flip)
        assert.strictEqual(error._tag, "LockRedisError")
        if (error._tag === "LockRedisError") assert.strictEqual(error.code, "WRONGTYPE")
        assert.isNull(yield* control.get(key), "the lock key the failed script wrote was released")
      })
  )

  server.effect("4. a temporary refusal (BUSY from a long script) is retried inside the budget", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "2 seconds" })
      const key = redisKey(lock.namespace, "busy-script")
      yield* control.command(key, "CONFIG", "SET", "busy-reply-threshold", "50")
      // A script that spins for ~400 ms keeps the server BUSY for everyone else.
      const spin = yield* Effect.forkChild(
        control.command(
          key,
          "EVAL",
          "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] while true do local n = redis.call('TIME') if n[1] * 1000000 + n[2] - s > 400000 then break end end return 1",
          "0"
        )
      )
      yield* Effect.sleep(100)
      const value = yield* Effect.succeed("after busy").pipe(lock.withLock("busy-script", { waitTimeout: "5 seconds" }))
      assert.strictEqual(value, "after busy")
      yield* Fiber.join(spin)
    })
  )

  it.effect("7. the body is never retried, and the lock is not reentrant", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      let runs = 0
      const failed = yield* Effect.sync(() => ++runs).pipe(
        Effect.andThen(Effect.fail("body failed" as const)),
        lock.withLock("once", { waitTimeout: "1 second" }),
        Effect.flip
      )
      assert.strictEqual(failed, "body failed")
      assert.strictEqual(runs, 1)
      const inner = yield* Effect.void.pipe(
        lock.withLock("same", { waitTimeout: "300 millis" }),
        Effect.flip,
        lock.withLock("same", { waitTimeout: "1 second" })
      )
      assert.strictEqual(inner._tag, "TimedOut", "the same key inside its own scope contends with itself")
    })
  )

  keys.effect("8. interrupting a waiting caller stops promptly and leaves nothing held", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "2 seconds" })
      const key = redisKey(lock.namespace, "waited")
      yield* control.set(key, "holder", 2_000)
      let ran = false
      const waiter = yield* Effect.forkChild(
        Effect.sync(() => (ran = true)).pipe(lock.withLock("waited", { waitTimeout: "30 seconds" }))
      )
      yield* Effect.sleep(200)
      const start = yield* now
      yield* Fiber.interrupt(waiter)
      assert.isBelow((yield* now) - start, 1_000, "interruption is prompt")
      assert.isFalse(ran)
      yield* control.del(key)
      yield* Effect.sleep(300)
      assert.isNull(yield* control.get(key), "the interrupted waiter did not take the lock afterwards")
    })
  )

  keys.effect("9. any key text works, and namespaces never contend", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace() })
      const keys = ["{", "}", "{}", "}{", "a:b:c", "with space", "ünïcødé ✓ 🔒", "%7B", "tab\tand\nnewline", "{tag}x"]
      for (const key of keys) {
        const seen = yield* Effect.gen(function* () {
          const probe = yield* Effect.succeed("inside").pipe(lock.tryWithLock(key))
          return probe
        }).pipe(lock.withLock(key, { waitTimeout: "1 second" }))
        assert.isTrue(Option.isNone(seen), `the lock for ${JSON.stringify(key)} is held inside its body`)
      }
      const bytes = yield* Lock.make({ namespace: lock.namespace, keyCodec: KeyCodec.bytes })
      const raw = new Uint8Array([0, 0xff, 0x7b, 0x7d, 0xc3])
      yield* Effect.void.pipe(bytes.withLock(raw, { waitTimeout: "1 second" }))
      const other = yield* Lock.make({ namespace: uniqueNamespace() })
      const both = yield* Effect.succeed("other namespace").pipe(
        other.tryWithLock("shared"),
        lock.withLock("shared", { waitTimeout: "1 second" })
      )
      assert.deepStrictEqual(both, Option.some("other namespace"))
      assert.isNull(yield* control.get(redisKey(lock.namespace, "shared")))
    })
  )

  it.effect("9. bad options and keys are InvalidArgument naming the field", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<readonly [Lock.LockOptions, string]> = [
        [{ leaseDuration: "29 millis" }, "leaseDuration"],
        [{ leaseDuration: 0 }, "leaseDuration"],
        [{ leaseDuration: "Infinity" }, "leaseDuration"],
        [{ leaseDuration: Number.NaN }, "leaseDuration"],
        [{ leaseDuration: "ten seconds" as never }, "leaseDuration"],
        [{ namespace: "" }, "namespace"],
        [{ namespace: "a{b}" }, "namespace"]
      ]
      for (const [options, field] of cases) {
        const error = yield* Effect.flip(Lock.make(options))
        assert(error._tag === "InvalidArgument", error.message)
        assert.strictEqual(error.field, field, JSON.stringify(options))
      }
      const lock = yield* Lock.make({ namespace: uniqueNamespace() })
      for (const key of ["", "\ud800"]) {
        const error = yield* Effect.void.pipe(lock.withLock(key, { waitTimeout: "1 second" }), Effect.flip)
        assert.strictEqual(error._tag, "InvalidArgument")
        if (error._tag === "InvalidArgument") assert.strictEqual(error.field, "key")
      }
      const ok = yield* Effect.flip(Lock.make({ leaseDuration: "30 millis" })).pipe(Effect.option)
      assert.isTrue(Option.isNone(ok), "30 ms is the minimum and is accepted")
    })
  )

  keys.effect("1. waiters eventually all get the lock once a holder leaves", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      // Each waiter has its own client, so they meet at the server rather than in one client's queue.
      const clients = yield* Effect.forEach([1, 2, 3, 4], () =>
        Lock.make({ namespace: lock.namespace, leaseDuration: "1 second" })
      )
      const results = yield* Effect.forEach(
        [1, 2, 3, 4],
        (n) => Effect.sleep(50).pipe(Effect.as(n), clients[n - 1]!.withLock("queue", { waitTimeout: "10 seconds" })),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(results.toSorted(), [1, 2, 3, 4])
      yield* eventually(
        "lock released",
        Effect.map(control.get(redisKey(lock.namespace, "queue")), (v) => v === null)
      )
    })
  )
}
