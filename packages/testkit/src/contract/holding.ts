/**
 * Contract: holding a lock. Renewal, loss detection and interruption of the body, release in every
 * outcome, behaviour under maxmemory, and mutual exclusion under contention (items 5, 6 and 10).
 *
 * @since 0.1.0
 */
import { assert, type Vitest } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import { Lease, Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ServerControl } from "./ServerControl.ts"
import { forkUntilInside, overlapRecorder, type Reach, reaching, redisKey, uniqueNamespace } from "./support.ts"

type It = Vitest.MethodsNonLive<LockBackend | ServerControl>

export const holding = (it: It, reach: Reach): void => {
  const keys = reaching(it, reach, "keys")
  const server = reaching(it, reach, "server")
  keys.effect("5. the lease is renewed while the body runs, so the body may outlive many leases", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      // Replicated deployments need several round trips (script, ROLE, WAIT) per renewal, and CI
      // machines are loaded: a 400 ms lease was once lost on a Cluster in CI (a renewal sent late
      // found 100 ms left). 800 ms leases, renewed every 266 ms, ride out such stalls.
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "800 millis" })
      const key = redisKey(lock.namespace, "long")
      const ttls: Array<number> = []
      const value = yield* Effect.gen(function* () {
        for (let i = 0; i < 8; i++) {
          yield* Effect.sleep(450)
          ttls.push(yield* control.pttl(key))
        }
        return "done after ~4.5 leases"
      }).pipe(lock.withLock("long", { waitTimeout: "1 second" }))
      assert.strictEqual(value, "done after ~4.5 leases")
      assert.isTrue(
        ttls.every((ttl) => ttl > 0),
        `the key kept a live lease throughout: ${ttls.join(",")}`
      )
      assert.isNull(yield* control.get(key))
    })
  )

  for (const [label, disturb] of [
    ["deleted", (control: ServerControl["Service"], key: string) => control.del(key)],
    ["taken by another owner", (control: ServerControl["Service"], key: string) => control.set(key, "thief", 10_000)]
  ] as const) {
    keys.effect(`5. ownership lost (key ${label}): the body is interrupted, its finalizers run, then LockLost`, () =>
      Effect.gen(function* () {
        const control = yield* ServerControl
        const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "400 millis" })
        const key = redisKey(lock.namespace, "stolen")
        let finalized = false
        let completed = false
        const fiber = yield* forkUntilInside((inside) =>
          inside.pipe(
            Effect.andThen(Effect.sleep("10 seconds")),
            Effect.andThen(Effect.sync(() => (completed = true))),
            Effect.onInterrupt(() => Effect.sleep(50).pipe(Effect.andThen(Effect.sync(() => (finalized = true))))),
            lock.withLock("stolen", { waitTimeout: "1 second" }),
            Effect.flip
          )
        )
        yield* disturb(control, key)
        const error = yield* Fiber.join(fiber).pipe(Effect.timeout("3 seconds"))
        assert.strictEqual(error._tag, "LockLost")
        if (error._tag === "LockLost") {
          assert.strictEqual(error.phase, "renew")
          assert.strictEqual(error.reason, "ownership")
          assert.isFalse(error.bodyCompleted)
        }
        assert.isTrue(finalized, "the body's finalizers ran before LockLost was returned")
        assert.isFalse(completed)
        if (label === "taken by another owner") {
          assert.strictEqual(yield* control.get(key), "thief", "release never deletes another owner's lock")
        }
      })
    )
  }

  server.effect("5. no recovery within the usable lease (server frozen): LockLost and the body stops", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "300 millis" })
      const key = redisKey(lock.namespace, "frozen-holder")
      const fiber = yield* forkUntilInside((inside) =>
        inside.pipe(
          Effect.andThen(Effect.never),
          lock.withLock("frozen-holder", { waitTimeout: "1 second" }),
          Effect.flip
        )
      )
      yield* control.pause(key)
      const error = yield* Fiber.join(fiber).pipe(Effect.timeout("5 seconds"), Effect.ensuring(control.resume(key)))
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") {
        assert.strictEqual(error.phase, "renew")
        assert.strictEqual(error.reason, "expired")
      }
    })
  )

  server.effect("5. a temporary renewal stall shorter than the usable lease is ridden out", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1500 millis" })
      const key = redisKey(lock.namespace, "paused-writes")
      const value = yield* Effect.gen(function* () {
        yield* Effect.sleep(100)
        // Writes (and write scripts) block for 400 ms; the renewal due at ~500 ms waits, then succeeds.
        yield* control.command(key, "CLIENT", "PAUSE", "400", "WRITE")
        yield* Effect.sleep(2_000)
        return "survived"
      }).pipe(lock.withLock("paused-writes", { waitTimeout: "1 second" }))
      assert.strictEqual(value, "survived")
    })
  )

  keys.effect("6. release runs after a failed body, and the body's failure is what the caller sees", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      const key = redisKey(lock.namespace, "fails")
      const error = yield* Effect.fail({ _tag: "BodyFailed" as const }).pipe(
        lock.withLock("fails", { waitTimeout: "1 second" }),
        Effect.flip
      )
      assert.strictEqual(error._tag, "BodyFailed")
      assert.isNull(yield* control.get(key))
      const defect = yield* Effect.die("boom").pipe(lock.withLock("fails", { waitTimeout: "1 second" }), Effect.exit)
      assert.isTrue(Exit.isFailure(defect))
      assert.isNull(yield* control.get(key), "released after a defect too")
    })
  )

  keys.effect("6. interrupting the caller during the body interrupts the body, releases, and propagates", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      const key = redisKey(lock.namespace, "interrupted")
      let bodyInterrupted = false
      const fiber = yield* forkUntilInside((inside) =>
        inside.pipe(
          Effect.andThen(Effect.never),
          Effect.onInterrupt(() => Effect.sync(() => (bodyInterrupted = true))),
          lock.withLock("interrupted", { waitTimeout: "1 second" })
        )
      )
      assert.isNotNull(yield* control.get(key))
      const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
      assert.isTrue(Exit.hasInterrupts(exit), "the interruption propagates")
      assert.isTrue(bodyInterrupted)
      assert.isNull(yield* control.get(key), "released before the interruption completed")
    })
  )

  for (const [label, disturb, left] of [
    // Taken by another owner: the key holds its token, which the release leaves alone.
    [
      "taken by another owner",
      (control: ServerControl["Service"], key: string) => control.set(key, "new-owner", 5_000),
      "new-owner"
    ],
    // Deleted, with nobody taking it since: gone while the lease should still have held it.
    ["deleted under a live lease", (control: ServerControl["Service"], key: string) => control.del(key), null]
  ] as const) {
    keys.effect(`6. release that finds the lock ${label} after a successful body fails with LockLost`, () =>
      Effect.gen(function* () {
        const control = yield* ServerControl
        const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "5 seconds" })
        const key = redisKey(lock.namespace, "gone")
        const error = yield* disturb(control, key).pipe(
          Effect.as("result"),
          lock.withLock("gone", { waitTimeout: "1 second" }),
          Effect.flip
        )
        assert.strictEqual(error._tag, "LockLost")
        if (error._tag === "LockLost") {
          assert.strictEqual(error.phase, "release")
          assert.isTrue(error.bodyCompleted, "the error says the body did run")
        }
        assert.strictEqual(yield* control.get(key), left)
      })
    )
  }

  it.effect("6. a release with the lease's fence tells a key gone with nobody taking it from one taken since", () =>
    Effect.gen(function* () {
      const backend = yield* LockBackend
      const key = redisKey(uniqueNamespace(), "fenced-release")
      const mine = { key, token: "mine", leaseMillis: 10_000, timeoutMillis: 2_000, acknowledge: false }
      const granted = yield* backend.acquire(mine)
      assert.strictEqual(granted._tag, "Acquired")
      if (granted._tag !== "Acquired") return
      // The release deletes the key; a retry (its reply was lost) finds it gone.
      assert.strictEqual(yield* backend.release({ ...mine, fence: granted.fence }), true, "held: released")
      assert.strictEqual(yield* backend.release(mine), false, "without the fence a gone key proves nothing")
      assert.strictEqual(yield* backend.release({ ...mine, fence: granted.fence }), "gone", "no grant since")
      assert.strictEqual(yield* backend.release({ ...mine, fence: granted.fence - 1 }), false, "not the last fence")
      // Another client takes the key and frees it: from then on a gone key proves nothing.
      const theirs = { ...mine, token: "theirs" }
      assert.strictEqual((yield* backend.acquire(theirs))._tag, "Acquired")
      assert.strictEqual(yield* backend.release({ ...mine, fence: granted.fence }), false, "held by another")
      assert.strictEqual(yield* backend.release(theirs), true)
      assert.strictEqual(yield* backend.release({ ...mine, fence: granted.fence }), false, "a grant followed")
    })
  )

  for (const [label, meanwhile] of [
    ["nobody taking the key: the body's value", false],
    ["another caller taking and freeing it meanwhile: LockLost", true]
  ] as const) {
    keys.effect(`6. a release that reaches the server after the lease ran out there, ${label}`, () =>
      Effect.gen(function* () {
        const control = yield* ServerControl
        const backend = yield* LockBackend
        // The release waits before it goes out, as behind thousands of others in the client's
        // queue, until the key has expired on the server (and, for the second case, another caller
        // has taken and freed it): the body ends within its 300 ms lease, its release starts within
        // it, and reaches the server after the lease ran out there.
        const go = yield* Deferred.make<void>()
        const late: typeof backend = {
          ...backend,
          release: (request) => Effect.andThen(Deferred.await(go), backend.release(request))
        }
        const namespace = uniqueNamespace()
        const lock = yield* Lock.make({ namespace, leaseDuration: "300 millis" }).pipe(
          Effect.provideService(LockBackend, late)
        )
        const key = redisKey(namespace, "late-release")
        const warnings: Array<string> = []
        const logger = Logger.make((options) => {
          if (options.logLevel === "Warn") warnings.push(String(options.message))
        })
        const fiber = yield* forkUntilInside((inside) =>
          inside.pipe(
            Effect.as("kept"),
            lock.withLock("late-release", { waitTimeout: "1 second" }),
            Effect.provide(Logger.layer([logger])),
            Effect.result
          )
        )
        while ((yield* control.get(key)) !== null) yield* Effect.sleep(5)
        if (meanwhile) {
          const other = yield* Lock.make({ namespace, leaseDuration: "300 millis" })
          yield* Effect.void.pipe(other.withLock("late-release", { waitTimeout: "1 second" }))
        }
        yield* Deferred.succeed(go, undefined)
        const result = yield* Fiber.join(fiber)
        if (meanwhile) {
          assert.isTrue(
            result._tag === "Failure" && result.failure._tag === "LockLost" && result.failure.phase === "release",
            `LockLost at release: ${JSON.stringify(result)}`
          )
        } else {
          assert.isTrue(result._tag === "Success" && result.success === "kept", `the value: ${JSON.stringify(result)}`)
          assert.isTrue(
            warnings.some((message) => message.includes("expired before its release reached the server")),
            `the late release is logged as such: ${JSON.stringify(warnings)}`
          )
        }
        assert.isNull(yield* control.get(key))
      })
    )
  }

  server.effect("6. release that cannot reach the server after a successful body returns the result", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "5 seconds" })
      const key = redisKey(lock.namespace, "unreachable")
      const value = yield* control
        .pause(key)
        .pipe(
          Effect.as("kept"),
          lock.withLock("unreachable", { waitTimeout: "1 second" }),
          Effect.ensuring(control.resume(key))
        )
      assert.strictEqual(value, "kept")
    })
  )

  server.effect("10. renewal keeps working under maxmemory while new acquisitions get OOM", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      // 1 s: room for a cold first renewal on a replicated deployment (a new pooled connection plus
      // the script's first load) on a loaded CI machine (with 500 ms, a renewal of a shared Cluster
      // client once went unanswered for the 241 ms it had left); the body spans two leases.
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "1 second" })
      const key = redisKey(lock.namespace, "oom")
      const restore = control.command(key, "CONFIG", "SET", "maxmemory", "0").pipe(Effect.ignore)
      const outcome = yield* Effect.gen(function* () {
        yield* control.command(key, "CONFIG", "SET", "maxmemory-policy", "noeviction")
        yield* control.command(key, "CONFIG", "SET", "maxmemory", "1")
        // Same key text in another namespace: same hash tag, so the same node even on a Cluster.
        const neighbour = yield* Lock.make({ namespace: uniqueNamespace() })
        const other = yield* Effect.void.pipe(neighbour.withLock("oom", { waitTimeout: "2 seconds" }), Effect.flip)
        yield* Effect.sleep(2_000)
        return other
      }).pipe(lock.withLock("oom", { waitTimeout: "1 second" }), Effect.ensuring(restore))
      assert.strictEqual(outcome._tag, "LockRedisError")
      if (outcome._tag === "LockRedisError") assert.strictEqual(outcome.code, "OOM")
    })
  )

  keys.effect("exclusion: concurrent read-sleep-write increments never overlap and none is lost", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      // Bodies are short; the lease only has to outlast a scheduling stall under a loaded CI machine.
      const lock = yield* Lock.make({ namespace: uniqueNamespace(), leaseDuration: "2 seconds" })
      const counter = `${lock.namespace}:counter`
      const recorder = overlapRecorder()
      const increment = (client: Lock.LockClient<string>) =>
        Effect.gen(function* () {
          yield* recorder.enter
          const current = Number((yield* control.get(counter)) ?? "0")
          yield* Effect.sleep(3)
          yield* control.set(counter, String(current + 1))
          yield* recorder.exit
        }).pipe(client.withLock("counter", { waitTimeout: "30 seconds" }))
      const workers = 12
      const perWorker = 5
      // A client per worker, as separate processes would have: exclusion comes from the server alone.
      yield* Effect.forEach(
        Array.from({ length: workers }),
        () =>
          Effect.flatMap(Lock.make({ namespace: lock.namespace, leaseDuration: "2 seconds" }), (client) =>
            Effect.repeat(increment(client), { times: perWorker - 1 })
          ),
        { concurrency: "unbounded", discard: true }
      )
      assert.strictEqual(recorder.maxInside(), 1, "no two bodies overlapped")
      assert.strictEqual(recorder.completed(), workers * perWorker)
      assert.strictEqual(Number(yield* control.get(counter)), recorder.completed(), "no increment was lost")
    })
  )

  keys.effect("exclusion and fences when a client hands a key among its own fibers, with another client waiting", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const namespace = uniqueNamespace()
      // Leases short enough that a key handed on (a transfer, where the backend has one) must be
      // renewed when a body outlives it, and long enough (1 s, renewed every 333 ms) to ride out a
      // scheduling stall on a loaded CI machine.
      const busy = yield* Lock.make({ namespace, leaseDuration: "1 second" })
      const lone = yield* Lock.make({ namespace, leaseDuration: "1 second" })
      const recorder = overlapRecorder()
      const fences: Array<number> = []
      const turns = { busy: 0, lone: 0 }
      const body = (who: "busy" | "lone") =>
        Effect.gen(function* () {
          yield* recorder.enter
          fences.push(yield* Lease.fencingToken)
          // Two bodies in a row outlive their lease: with the other client waiting, the busy client
          // alternates one acquisition and two transfers, so at least one of them holds a key handed on.
          yield* Effect.sleep(who === "busy" && (turns.busy === 4 || turns.busy === 5) ? 1_100 : 2)
          turns[who]++
          yield* recorder.exit
        })
      const worker = (client: Lock.LockClient<string>, who: "busy" | "lone", times: number) =>
        Effect.repeat(body(who).pipe(client.withLock("shared", { waitTimeout: "30 seconds" })), { times: times - 1 })
      // Six fibers of one client keep the key wanted; the other client's one fiber must still get its turns.
      yield* Effect.all([...Array.from({ length: 6 }, () => worker(busy, "busy", 8)), worker(lone, "lone", 8)], {
        concurrency: "unbounded",
        discard: true
      })
      assert.strictEqual(recorder.maxInside(), 1, "no two bodies overlapped")
      assert.deepStrictEqual(turns, { busy: 48, lone: 8 })
      for (let i = 1; i < fences.length; i++) {
        assert.isAbove(fences[i]!, fences[i - 1]!, `fencing token ${i} is above the one before`)
      }
      assert.strictEqual(yield* control.pttl(redisKey(namespace, "shared")), -2, "nothing is left held")
    })
  )
}
