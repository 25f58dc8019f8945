// Handing a held lock to the next fiber of the same client (Backend.transfer), over the in-memory
// backend with its replies delayed, failed or annotated under TestClock: the rare branches (a lost
// reply, a grant nobody takes, the fairness bound) cannot be timed against a server. The contract
// suite shows the same path on real servers.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { TestClock } from "effect/testing"
import * as Lease from "../src/Lease.ts"
import * as Lock from "../src/Lock.ts"
import { type Backend, LockBackend, type TransferReply, type TransferRequest } from "../src/LockBackend.ts"
import { type LockError, LockRedisError } from "../src/LockError.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"

/** The memory backend, with every call written down and the transfer replaced when asked. */
const recorded = (
  transfer?: (
    memory: Backend,
    request: TransferRequest,
    attempt: number
  ) => Effect.Effect<TransferReply, LockRedisError>
) =>
  Effect.map(MemoryBackend.make, (memory) => {
    const events: Array<string> = []
    const transfers: Array<TransferRequest> = []
    const acquires: Array<string> = []
    const backend: Backend = {
      ...memory,
      acquire: (request) =>
        Effect.tap(memory.acquire(request), (reply) =>
          Effect.sync(() => {
            acquires.push(request.token)
            events.push(`acquire ${reply._tag}`)
          })
        ),
      transfer: (request) =>
        Effect.suspend(() => {
          transfers.push(request)
          const reply = transfer?.(memory, request, transfers.length) ?? memory.transfer!(request)
          return Effect.tap(reply, (reply) => Effect.sync(() => events.push(`transfer ${reply._tag}`)))
        }),
      release: (request) => Effect.tap(memory.release(request), (ok) => Effect.sync(() => events.push(`release ${ok}`)))
    }
    return { backend, events, transfers, acquires }
  })

const lostReply = (mayHaveExecuted: boolean, retryable: boolean): LockRedisError =>
  new LockRedisError({
    command: "test",
    kind: "timeout",
    code: "TIMEOUT",
    reply: "the reply was lost",
    retryable,
    mayHaveExecuted
  })

/** A call that takes 300 ms (or its whole time limit, if shorter) and then fails, retryably, maybe applied. */
const slowFailure = (timeoutMillis: number) =>
  Effect.andThen(Effect.sleep(Math.min(300, timeoutMillis)), Effect.fail(lostReply(true, true)))

/** A holder that stays inside until `leave`, and `n` fibers queued behind it, each recording its fence. */
const queue = (lock: Lock.LockClient<string>, n: number, waitTimeout: Duration.Input = "10 seconds") =>
  Effect.gen(function* () {
    const inside = yield* Deferred.make<void>()
    const leave = yield* Deferred.make<void>()
    const fences: Array<number> = []
    const record = Effect.flatMap(Lease.fencingToken, (fence) => Effect.sync(() => fences.push(fence)))
    const holder = yield* Effect.forkChild(
      record.pipe(
        Effect.andThen(Deferred.succeed(inside, undefined)),
        Effect.andThen(Deferred.await(leave)),
        lock.withLock("k", { waitTimeout: "1 second" })
      )
    )
    yield* Deferred.await(inside)
    const waiters: Array<Fiber.Fiber<number, LockError>> = []
    for (let i = 0; i < n; i++) {
      waiters.push(yield* Effect.forkChild(record.pipe(lock.withLock("k", { waitTimeout }))))
    }
    yield* TestClock.adjust("1 millis")
    return { leave, holder, waiters, fences }
  })

describe("transfer to the next fiber of the same client", () => {
  it.effect("the waiting fiber gets the lock in one call, never free in between, with a higher fence", () =>
    Effect.gen(function* () {
      const { backend, events } = yield* recorded()
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      const { fences, holder, leave, waiters } = yield* queue(lock, 1)
      yield* Deferred.succeed(leave, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.joinAll(waiters)
      // One acquisition at the server for two bodies; the last body frees the key.
      assert.deepStrictEqual(events, ["acquire Acquired", "transfer Transferred", "release true"])
      assert.lengthOf(fences, 2)
      assert.isAbove(fences[1]!, fences[0]!)
      const other = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      assert.deepStrictEqual(yield* other.tryWithLock("k")(Effect.succeed(1)), Option.some(1), "nothing left held")
    })
  )

  it.effect("a grant whose fiber gave up meanwhile is released, not left to its lease", () =>
    Effect.gen(function* () {
      // The transfer's reply takes 100 ms; the waiter gives up after 50.
      const { backend, events } = yield* recorded((memory, request) =>
        Effect.tap(memory.transfer!(request), () => Effect.sleep("100 millis"))
      )
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      const { holder, leave, waiters } = yield* queue(lock, 1, "50 millis")
      yield* Deferred.succeed(leave, undefined)
      yield* TestClock.adjust("200 millis")
      yield* Fiber.join(holder)
      const waited = yield* Effect.flip(Fiber.join(waiters[0]!))
      assert.strictEqual(waited._tag, "TimedOut")
      assert.deepStrictEqual(events, ["acquire Acquired", "transfer Transferred", "release true"])
      const other = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      assert.deepStrictEqual(yield* other.tryWithLock("k")(Effect.succeed(1)), Option.some(1), "the grant was released")
    })
  )

  it.effect("a transfer whose reply was lost is sent again and stays one transfer, with one fence", () =>
    Effect.gen(function* () {
      let fenceGiven = 0
      const { backend, events, transfers } = yield* recorded((memory, request, attempt) =>
        Effect.flatMap(memory.transfer!(request), (reply) => {
          if (attempt > 1) return Effect.succeed(reply)
          if (reply._tag === "Transferred") fenceGiven = reply.fence
          return Effect.fail(lostReply(true, true))
        })
      )
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      const { fences, holder, leave, waiters } = yield* queue(lock, 1)
      yield* Deferred.succeed(leave, undefined)
      yield* TestClock.adjust("100 millis")
      yield* Fiber.join(holder)
      yield* Fiber.joinAll(waiters)
      assert.lengthOf(transfers, 2)
      assert.strictEqual(transfers[0]!.successorToken, transfers[1]!.successorToken, "the same transfer, sent again")
      assert.deepStrictEqual(events, ["acquire Acquired", "transfer Transferred", "release true"])
      assert.strictEqual(fences[1], fenceGiven, "the fence of the transfer the server made")
    })
  )

  it.effect("a transfer that cannot be confirmed leaves the next fiber to acquire with the token it may hold", () =>
    Effect.gen(function* () {
      // Executed, then a permanent failure: the releasing call cannot tell whether it happened.
      const { acquires, backend, events, transfers } = yield* recorded((memory, request) =>
        Effect.andThen(memory.transfer!(request), Effect.fail(lostReply(true, false)))
      )
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      const { fences, holder, leave, waiters } = yield* queue(lock, 1)
      yield* Deferred.succeed(leave, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.joinAll(waiters)
      assert.lengthOf(transfers, 1)
      assert.strictEqual(acquires[1], transfers[0]!.successorToken, "the next fiber asks with the transferred token")
      assert.deepStrictEqual(events, ["acquire Acquired", "acquire Acquired", "release true"])
      assert.lengthOf(fences, 2)
      assert.isAbove(fences[1]!, fences[0]!)
    })
  )

  it.effect("while other clients wait, a client keeps the key for its own fibers at most twice in a row", () =>
    Effect.gen(function* () {
      // The server says other clients wait for the key after every transfer.
      const { backend, events } = yield* recorded((memory, request) =>
        Effect.map(memory.transfer!(request), (reply) =>
          reply._tag === "Transferred" ? { ...reply, othersWaiting: true } : reply
        )
      )
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      const { holder, leave, waiters } = yield* queue(lock, 5)
      yield* Deferred.succeed(leave, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.joinAll(waiters)
      // Two transfers, then a release (the key goes to the server's line), and the count restarts.
      assert.deepStrictEqual(events, [
        "acquire Acquired",
        "transfer Transferred",
        "transfer Transferred",
        "release true",
        "acquire Acquired",
        "transfer Transferred",
        "transfer Transferred",
        "release true"
      ])
    })
  )

  it.effect("a transfer that finds the lock lost: the holder's call fails with LockLost, the next fiber acquires", () =>
    Effect.gen(function* () {
      // The holder's key is gone by the time it would hand it on (an operator deleted it).
      const { backend, events } = yield* recorded((memory, request) =>
        Effect.as(memory.release(request), { _tag: "NotOwner" } as const)
      )
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      const { fences, holder, leave, waiters } = yield* queue(lock, 1)
      yield* Deferred.succeed(leave, undefined)
      const lost = yield* Effect.flip(Fiber.join(holder))
      assert.strictEqual(lost._tag, "LockLost")
      if (lost._tag === "LockLost") assert.strictEqual(lost.phase, "release")
      yield* Fiber.joinAll(waiters)
      // The release after the transfer asks with the lease's fence: the key is gone with no grant since,
      // but it was gone while the lease still ran (deleted), so that is still a loss.
      assert.deepStrictEqual(events, [
        "acquire Acquired",
        "transfer NotOwner",
        "release gone",
        "acquire Acquired",
        "release true"
      ])
      assert.lengthOf(fences, 2)
    })
  )

  it.effect("a hand-on that fails during an outage ends within the release's one second, grant clean-up included", () =>
    Effect.gen(function* () {
      // Every transfer and every release waits 300 ms (or its time limit) and then fails, retryably,
      // maybe applied.
      const memory = yield* MemoryBackend.make
      let releases = 0
      const backend: Backend = {
        ...memory,
        transfer: (request) => slowFailure(request.timeoutMillis),
        release: (request) => Effect.suspend(() => (releases++, slowFailure(request.timeoutMillis)))
      }
      const lock = yield* Lock.make({ leaseDuration: "10 seconds" }).pipe(Effect.provideService(LockBackend, backend))
      // The waiter gives up long before the transfer does: the grant is then nobody's.
      const { holder, leave, waiters } = yield* queue(lock, 1, "50 millis")
      yield* Deferred.succeed(leave, undefined)
      for (let elapsed = 0; elapsed < 1_050 && holder.pollUnsafe() === undefined; elapsed += 10) {
        yield* TestClock.adjust("10 millis")
      }
      const endedInTime = holder.pollUnsafe() !== undefined
      const releasesInTime = releases
      // Let whatever still runs finish, so a failing run ends instead of hanging on the test clock.
      yield* TestClock.adjust("5 seconds")
      assert.isTrue(endedInTime, "the holder's call ended within the bound")
      assert.strictEqual(releasesInTime, 0, "no time was left for the grant's release: its lease frees the key")
      assert.strictEqual((yield* Effect.flip(Fiber.join(waiters[0]!)))._tag, "TimedOut")
    })
  )
})
