// The in-memory backend under TestClock: the lock's behaviour without a server, with lease expiry
// driven by the test. (Evidence that the lock works across processes comes from the real-server
// contract suite; this shows the product backend keeps the same semantics.)
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { TestClock } from "effect/testing"
import * as Lock from "../src/Lock.ts"
import { type Backend, type LeaseRequest, LockBackend } from "../src/LockBackend.ts"
import { LockRedisError } from "../src/LockError.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"

const lostReply = new LockRedisError({
  command: "EVALSHA",
  kind: "timeout",
  code: "TIMEOUT",
  reply: "no reply within the limit",
  retryable: true,
  mayHaveExecuted: true
})
const neverSent = new LockRedisError({
  command: "EVALSHA",
  kind: "connection",
  code: "OFFLINE",
  reply: "the connection is down",
  retryable: true,
  mayHaveExecuted: false
})
// The first release runs on the in-memory backend, then `between`, then it fails with `error`.
const firstReleaseFails = (
  error: LockRedisError,
  between: (memory: Backend, key: string) => Effect.Effect<void, LockRedisError> = () => Effect.void
) =>
  Effect.gen(function* () {
    const memory = yield* MemoryBackend.make
    const releases: Array<LeaseRequest> = []
    const backend: Backend = {
      ...memory,
      release: (request) =>
        Effect.suspend(() => {
          releases.push(request)
          if (releases.length > 1) return memory.release(request)
          return memory
            .release(request)
            .pipe(Effect.andThen(between(memory, request.key)), Effect.andThen(Effect.fail(error)))
        })
    }
    const lock = yield* Lock.make().pipe(Effect.provideService(LockBackend, backend))
    const fiber = yield* Effect.forkChild(
      Effect.result(lock.withLock("k", { waitTimeout: "1 second" })(Effect.succeed("value")))
    )
    yield* TestClock.adjust("1 second")
    return { result: yield* Fiber.join(fiber), releases }
  })

/** `run` after `delayMillis` (a queue in front of the server), during which `between` runs. */
const heldUp = <A>(
  delayMillis: number,
  between: Effect.Effect<unknown, LockRedisError>,
  run: Effect.Effect<A, LockRedisError>
): Effect.Effect<A, LockRedisError> => Effect.sleep(delayMillis).pipe(Effect.andThen(between), Effect.andThen(run))

/** A lock client with a 300 ms lease over `backend`. */
const shortLeaseOver = (backend: Backend) =>
  Lock.make({ leaseDuration: "300 millis" }).pipe(Effect.provideService(LockBackend, backend))

// The body ends at once; its release is held up for `delayMillis` (a queue in front of the
// server), during which `between` runs, and then runs on the in-memory backend.
const lateRelease = (
  delayMillis: number,
  between: (memory: Backend, request: LeaseRequest) => Effect.Effect<unknown, LockRedisError> = () => Effect.void
) =>
  Effect.gen(function* () {
    const memory = yield* MemoryBackend.make
    const lock = yield* shortLeaseOver({
      ...memory,
      release: (request) => heldUp(delayMillis, between(memory, request), memory.release(request))
    })
    const fiber = yield* Effect.forkChild(
      Effect.result(lock.withLock("k", { waitTimeout: "1 second" })(Effect.succeed("value")))
    )
    yield* TestClock.adjust("1 second")
    return yield* Fiber.join(fiber)
  })

// Two fibers of one client want the key: the first holds it, the second waits behind it, so the
// first's release hands the key on with a transfer. That transfer is held up for `delayMillis`,
// during which `between` runs, and then runs on the in-memory backend. Returns the first call's
// result and whether the second got the lock.
const lateTransfer = (
  delayMillis: number,
  between: (memory: Backend, key: string) => Effect.Effect<unknown, LockRedisError> = () => Effect.void
) =>
  Effect.gen(function* () {
    const memory = yield* MemoryBackend.make
    const lock = yield* shortLeaseOver({
      ...memory,
      transfer: (request) => heldUp(delayMillis, between(memory, request.key), memory.transfer!(request))
    })
    const inside = yield* Deferred.make<void>()
    const first = yield* Effect.forkChild(
      Effect.result(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Effect.sleep("10 millis")),
          Effect.as("value"),
          lock.withLock("k", { waitTimeout: "1 second" })
        )
      )
    )
    yield* Deferred.await(inside)
    const second = yield* Effect.forkChild(Effect.result(lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void)))
    yield* TestClock.adjust("10 seconds")
    return { first: yield* Fiber.join(first), second: yield* Fiber.join(second) }
  })

/** A request for key `k` of the default namespace, as a lock client would send it. */
const request = (token: string, waiterId?: string): LeaseRequest => ({
  key: "lock:{k}",
  token,
  leaseMillis: 30_000,
  timeoutMillis: 1_000,
  acknowledge: false,
  waiter: waiterId === undefined ? undefined : { id: waiterId, ttlMillis: 30_000 }
})

describe("MemoryBackend", () => {
  it.effect("excludes, renews past the lease, and hands over on release", () =>
    Effect.gen(function* () {
      const lock = yield* Lock.make({ leaseDuration: "300 millis" })
      const inside = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Effect.sleep("2 seconds")),
          Effect.as("held for 2 s"),
          lock.withLock("k", { waitTimeout: "1 second" })
        )
      )
      yield* Deferred.await(inside)
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)), "busy while held")
      yield* TestClock.adjust("1 second")
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)), "still held: renewed past its lease")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(holder), "held for 2 s")
      assert.deepStrictEqual(yield* lock.tryWithLock("k")(Effect.succeed(1)), Option.some(1), "free after release")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("an abandoned lease expires after its duration", () =>
    Effect.gen(function* () {
      const backend = yield* LockBackend
      yield* backend.acquire({
        key: "lock:{k}",
        token: "crashed",
        leaseMillis: 500,
        timeoutMillis: 1,
        acknowledge: false
      })
      const lock = yield* Lock.make({ leaseDuration: "500 millis" })
      assert.isTrue(Option.isNone(yield* lock.tryWithLock("k")(Effect.void)))
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(yield* lock.tryWithLock("k")(Effect.succeed("mine")), Option.some("mine"))
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a waiter times out exactly at waitTimeout while another holds the lock", () =>
    Effect.gen(function* () {
      const backend = yield* LockBackend
      yield* backend.acquire({
        key: "lock:{k}",
        token: "other",
        leaseMillis: 60_000,
        timeoutMillis: 1,
        acknowledge: false
      })
      const lock = yield* Lock.make()
      const waiter = yield* Effect.forkChild(Effect.flip(lock.withLock("k", { waitTimeout: "3 seconds" })(Effect.void)))
      yield* TestClock.adjust("3 seconds")
      const error = yield* Fiber.join(waiter)
      assert.strictEqual(error._tag, "TimedOut")
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a release wakes a client waiting on the same backend at once, not after its backoff", () =>
    Effect.gen(function* () {
      // Two clients over one backend, as two processes over one server.
      const holder = yield* Lock.make({ leaseDuration: "10 seconds" })
      const waiter = yield* Lock.make({ leaseDuration: "10 seconds" })
      const inside = yield* Deferred.make<void>()
      const leave = yield* Deferred.make<void>()
      const held = yield* Effect.forkChild(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(Deferred.await(leave)),
          holder.withLock("k", { waitTimeout: "1 second" })
        )
      )
      yield* Deferred.await(inside)
      let enteredAt = -1
      const waiting = yield* Effect.forkChild(
        Effect.flatMap(
          Effect.clockWith((clock) => clock.currentTimeMillis),
          (now) => Effect.sync(() => (enteredAt = now))
        ).pipe(waiter.withLock("k", { waitTimeout: "30 seconds" }))
      )
      // The waiter's first attempt finds the key held and registers; its backoff is then at its cap.
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(enteredAt, -1, "still waiting while the key is held")
      yield* Deferred.succeed(leave, undefined)
      yield* Fiber.join(held)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(enteredAt, 5_000, "entered as the key was released, with no clock time passing")
      yield* Fiber.join(waiting)
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("behind a waiter that never claims its turn, the next one takes the lock as the claim window ends", () =>
    Effect.gen(function* () {
      const backend = yield* LockBackend
      const waiter = yield* Lock.make({ leaseDuration: "30 seconds" })
      assert.strictEqual((yield* backend.acquire(request("holder")))._tag, "Acquired")
      // A waiter registers first and then stops answering (its process died): it never claims.
      assert.strictEqual((yield* backend.acquire(request("gone", "gone")))._tag, "Busy")
      let enteredAt = -1
      const waiting = yield* Effect.forkChild(
        Effect.flatMap(
          Effect.clockWith((clock) => clock.currentTimeMillis),
          (now) => Effect.sync(() => (enteredAt = now))
        ).pipe(waiter.withLock("k", { waitTimeout: "30 seconds" }))
      )
      // Registered behind it; its safety-net poll is 0.5-1 s away.
      yield* TestClock.adjust("400 millis")
      assert.strictEqual(yield* backend.release(request("holder")), true)
      // The release wakes the gone waiter, which has 500 ms to take the key, and tells the next one
      // so: that one asks right after the window, not at its next poll.
      yield* TestClock.adjust("500 millis")
      assert.strictEqual(enteredAt, -1, "the window of the waiter ahead is respected")
      yield* TestClock.adjust("2 millis")
      assert.strictEqual(enteredAt, 901, "taken as the window ended")
      yield* Fiber.join(waiting)
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  it.effect("a client with a steady backlog on a key cannot starve another client of it", () =>
    Effect.gen(function* () {
      const busy = yield* Lock.make({ leaseDuration: "10 seconds" })
      const other = yield* Lock.make({ leaseDuration: "10 seconds" })
      const counts = [0, 0, 0, 0, 0]
      // Each loop takes the key, holds it for 1 ms and asks again at once; four share one client.
      const loop = (lock: Lock.LockClient<string>, i: number) =>
        Effect.forkChild(
          Effect.forever(
            Effect.sleep("1 millis").pipe(
              Effect.andThen(Effect.sync(() => counts[i]!++)),
              lock.withLock("k", { waitTimeout: "30 seconds" })
            )
          )
        )
      const fibers = [yield* loop(busy, 0), yield* loop(busy, 1), yield* loop(busy, 2), yield* loop(busy, 3)]
      fibers.push(yield* loop(other, 4))
      for (let elapsed = 0; elapsed < 2_000; elapsed++) yield* TestClock.adjust("1 millis")
      yield* Fiber.interruptAll(fibers)
      const mean = counts.reduce((a, b) => a + b, 0) / counts.length
      assert.isAbove(mean, 50, `the loops ran: ${counts.join(", ")}`)
      assert.isAtLeast(Math.min(...counts), 0.5 * mean, `least served against the mean: ${counts.join(", ")}`)
    }).pipe(Effect.provide(MemoryBackend.layer))
  )

  describe("a release retried after its first attempt ran and its reply was lost", () => {
    it.effect("with no grant since, the retry confirms the release: the body's value", () =>
      Effect.gen(function* () {
        const { releases, result } = yield* firstReleaseFails(lostReply)
        assert.strictEqual(releases.length, 2)
        assert.isNumber(releases[0]!.fence, "every attempt carries the lease's fence")
        assert.strictEqual(releases[1]!.fence, releases[0]!.fence)
        assert.isTrue(result._tag === "Success" && result.success === "value", "the body's value, not LockLost")
      })
    )

    it.effect("after another client's grant, a key found gone is still LockLost", () =>
      Effect.gen(function* () {
        const { releases, result } = yield* firstReleaseFails(lostReply, (memory, key) => {
          const theirs = { key, token: "theirs", leaseMillis: 5_000, timeoutMillis: 1_000, acknowledge: false }
          return Effect.andThen(memory.acquire(theirs), memory.release(theirs))
        })
        assert.isNumber(releases[1]!.fence)
        assert.isTrue(
          result._tag === "Failure" && result.failure._tag === "LockLost" && result.failure.phase === "release"
        )
      })
    )

    it.effect("after a first attempt that cannot have run, a key found gone while the lease ran is LockLost", () =>
      Effect.gen(function* () {
        // Something else deleted the key under a live lease: nobody took it, but it was not ours.
        const { releases, result } = yield* firstReleaseFails(neverSent)
        assert.strictEqual(releases.length, 2)
        assert.isTrue(result._tag === "Failure" && result.failure._tag === "LockLost")
      })
    )
  })

  describe("a release that reaches the backend after the lease ran out there", () => {
    it.effect("with nobody taking the key in between: the body's value (the lease freed it)", () =>
      Effect.gen(function* () {
        const result = yield* lateRelease(400)
        assert.isTrue(result._tag === "Success" && result.success === "value", "the body's value, not LockLost")
      })
    )

    it.effect("with another client taking and freeing it in between: LockLost", () =>
      Effect.gen(function* () {
        const result = yield* lateRelease(400, (memory, { key }) => {
          const theirs = { key, token: "theirs", leaseMillis: 5_000, timeoutMillis: 1_000, acknowledge: false }
          return Effect.andThen(memory.acquire(theirs), memory.release(theirs))
        })
        assert.isTrue(
          result._tag === "Failure" && result.failure._tag === "LockLost" && result.failure.phase === "release"
        )
      })
    )

    it.effect("held up less than the lease, with the key deleted meanwhile: LockLost", () =>
      Effect.gen(function* () {
        // Deleted by something else (here: the same token, without the fence).
        const result = yield* lateRelease(50, (memory, request) => memory.release({ ...request, fence: undefined }))
        assert.isTrue(
          result._tag === "Failure" && result.failure._tag === "LockLost" && result.failure.phase === "release"
        )
      })
    )
  })

  describe("a transfer to the next fiber that reaches the backend after the lease ran out there", () => {
    it.effect("with nobody taking the key in between: the body's value, and the next fiber gets the lock", () =>
      Effect.gen(function* () {
        const { first, second } = yield* lateTransfer(400)
        assert.isTrue(first._tag === "Success" && first.success === "value", "the body's value, not LockLost")
        assert.strictEqual(second._tag, "Success")
      })
    )

    it.effect("with another client taking and freeing it in between: LockLost", () =>
      Effect.gen(function* () {
        const { first, second } = yield* lateTransfer(400, (memory, key) => {
          const theirs = { key, token: "theirs", leaseMillis: 5_000, timeoutMillis: 1_000, acknowledge: false }
          return Effect.andThen(memory.acquire(theirs), memory.release(theirs))
        })
        assert.isTrue(
          first._tag === "Failure" && first.failure._tag === "LockLost" && first.failure.phase === "release"
        )
        assert.strictEqual(second._tag, "Success")
      })
    )
  })
})
