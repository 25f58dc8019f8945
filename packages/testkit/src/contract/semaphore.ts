/**
 * Contract: semaphores and read-write locks. At most `limit` permits held across clients, permits
 * timed on the server's clock, the stored limit, the line's order, loss interrupting the body,
 * fencing tokens, waiters that give up, nothing left behind; readers sharing, writers alone and not
 * starved.
 *
 * @since 0.2.1
 */
import { assert, type Vitest } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { Lease, ReadWriteLock, Semaphore } from "@sage/lock"
import type { LockBackend } from "@sage/lock/LockBackend"
import { ServerControl } from "./ServerControl.ts"
import {
  eventually,
  forkUntilInside,
  overlapRecorder,
  type Reach,
  reaching,
  redisKey,
  uniqueNamespace
} from "./support.ts"

type It = Vitest.MethodsNonLive<LockBackend | ServerControl>

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason === undefined ? undefined : (reason as unknown as { readonly error: E }).error
}

/** The server's time in milliseconds (`TIME`) on the node that owns `key`. */
const serverMillis = (control: ServerControl["Service"], key: string) =>
  Effect.map(control.command(key, "TIME"), (reply) => {
    const [seconds, micros] = reply as ReadonlyArray<string>
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  })

export const semaphore = (it: It, reach: Reach): void => {
  const server = reaching(it, reach, "server")
  server.effect("S1. callers of two clients never hold more than the limit, and every one is served", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const namespace = uniqueNamespace("sem")
      const clients = yield* Effect.forEach([0, 1], () => Semaphore.make({ namespace, leaseDuration: "2 seconds" }))
      const recorder = overlapRecorder()
      const served = yield* Effect.forEach(
        Array.from({ length: 12 }, (_, i) => i),
        (i) =>
          clients[i % 2]!.withPermits("pool", { limit: 3, waitTimeout: "20 seconds" })(
            Effect.as(Effect.andThen(recorder.enter, Effect.andThen(Effect.sleep(30), recorder.exit)), i)
          ),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(served.length, 12)
      assert.isAtMost(recorder.maxInside(), 3, "never more than three inside")
      assert.isAtLeast(recorder.maxInside(), 2, "permits are shared, not taken one at a time")
      // Nothing is left behind but the fence: no holders, no line, no permits hash.
      const key = redisKey(namespace, "pool")
      for (const suffix of ["", ":waiters", ":waiting", ":permits", ":asks"]) {
        assert.strictEqual(yield* control.command(key, "EXISTS", key + suffix), 0, `${key}${suffix} is gone`)
      }
    })
  )

  server.effect("S2. a holder's permits end on the server's clock: its score is the server's time plus the lease", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const semaphores = yield* Semaphore.make({ namespace: uniqueNamespace("sem"), leaseDuration: "10 seconds" })
      const key = redisKey(semaphores.namespace, "k")
      const fiber = yield* forkUntilInside((inside) =>
        semaphores.withPermits("k", { limit: 5, permits: 2, waitTimeout: "2 seconds" })(
          Effect.andThen(inside, Effect.never)
        )
      )
      const members = (yield* control.command(key, "ZRANGE", key, "0", "-1", "WITHSCORES")) as ReadonlyArray<string>
      assert.strictEqual(members.length, 2, "one holder")
      const now = yield* serverMillis(control, key)
      const ends = Number(members[1])
      assert.isTrue(ends > now + 8_000 && ends <= now + 10_000, `ends ${ends - now} ms after the server's now`)
      const held = (yield* control.command(key, "HGET", `${key}:permits`, members[0]!)) as string
      assert.match(held, /^2:\d+$/, "two permits and the grant's fencing token")
      assert.strictEqual(yield* control.command(key, "HGET", `${key}:permits`, "=used"), "2")
      assert.strictEqual(yield* control.command(key, "HGET", `${key}:permits`, "=limit"), "5")
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(yield* control.command(key, "EXISTS", key), 0, "released")
    })
  )

  it.effect("S3. a caller with another limit gets InvalidArgument naming both while the semaphore is used", () =>
    Effect.gen(function* () {
      const namespace = uniqueNamespace("sem")
      const a = yield* Semaphore.make({ namespace })
      const b = yield* Semaphore.make({ namespace })
      const fiber = yield* forkUntilInside((inside) =>
        a.withPermits("k", { limit: 2, waitTimeout: "2 seconds" })(Effect.andThen(inside, Effect.never))
      )
      const exit = yield* Effect.exit(b.withPermits("k", { limit: 3, waitTimeout: "2 seconds" })(Effect.void))
      const error = failureOf(exit) as { readonly _tag: string; readonly message: string } | undefined
      assert.strictEqual(error?._tag, "InvalidArgument")
      assert.include(error!.message, "limit (3)")
      assert.include(error!.message, "limit 2")
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(
        yield* b.tryWithPermits("k", { limit: 3, permits: 3 })(Effect.succeed("taken over")),
        Option.some("taken over"),
        "unused again, the next limit applies"
      )
    })
  )

  it.effect("S4. first come, first served: a request for every permit is not overtaken by single ones", () =>
    Effect.gen(function* () {
      const namespace = uniqueNamespace("sem")
      const a = yield* Semaphore.make({ namespace })
      const b = yield* Semaphore.make({ namespace })
      const order: Array<string> = []
      const release = yield* Deferred.make<void>()
      const first = yield* forkUntilInside((inside) =>
        a.withPermits("k", { limit: 2, waitTimeout: "5 seconds" })(
          Effect.andThen(
            inside,
            Effect.andThen(
              Effect.sync(() => order.push("first")),
              Deferred.await(release)
            )
          )
        )
      )
      const big = yield* Effect.forkChild(
        b.withPermits("k", { limit: 2, permits: 2, waitTimeout: "10 seconds" })(
          Effect.andThen(
            Effect.sync(() => order.push("big")),
            Effect.sleep(50)
          )
        )
      )
      yield* Effect.sleep(200)
      // One permit is free, but the request for two came first.
      const small = yield* Effect.forkChild(
        a.withPermits("k", { limit: 2, waitTimeout: "10 seconds" })(Effect.sync(() => order.push("small")))
      )
      yield* Effect.sleep(300)
      assert.deepStrictEqual(order, ["first"], "the single request waits behind the big one")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(big)
      yield* Fiber.join(small)
      assert.deepStrictEqual(order, ["first", "big", "small"])
    })
  )

  server.effect("S5. permits removed at the server: the body is interrupted, its finalizers run, then LockLost", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const semaphores = yield* Semaphore.make({ namespace: uniqueNamespace("sem"), leaseDuration: "600 millis" })
      const key = redisKey(semaphores.namespace, "k")
      let finalized = false
      const fiber = yield* forkUntilInside((inside) =>
        semaphores.withPermits("k", { limit: 3, waitTimeout: "2 seconds" })(
          Effect.andThen(inside, Effect.sleep("20 seconds")).pipe(
            Effect.ensuring(Effect.sync(() => (finalized = true)))
          )
        )
      )
      const [member] = (yield* control.command(key, "ZRANGE", key, "0", "0")) as ReadonlyArray<string>
      yield* control.command(key, "ZREM", key, member!)
      const exit = yield* Fiber.await(fiber)
      const error = failureOf(exit) as { readonly _tag: string; readonly reason: string } | undefined
      assert.strictEqual(error?._tag, "LockLost")
      assert.isTrue(finalized, "the body's finalizers ran")
    })
  )

  it.effect("S6. every grant has its own fencing token, increasing across holders", () =>
    Effect.gen(function* () {
      const semaphores = yield* Semaphore.make({ namespace: uniqueNamespace("sem") })
      const tokens: Array<number> = []
      const record = Lease.Lease.use((lease) => Effect.sync(() => tokens.push(lease.fencingToken)))
      yield* Effect.forEach(
        [1, 2, 3, 4, 5],
        () => semaphores.withPermits("k", { limit: 2, waitTimeout: "2 seconds" })(record),
        { concurrency: 2, discard: true }
      )
      assert.strictEqual(new Set(tokens).size, 5, "five distinct tokens")
      for (let i = 1; i < tokens.length; i++) assert.isAbove(tokens[i]!, 0)
      const again = yield* semaphores.withPermits("k", { limit: 2, waitTimeout: "2 seconds" })(
        Lease.Lease.use((lease) => Effect.succeed(lease.fencingToken))
      )
      assert.isAbove(again, Math.max(...tokens), "a later grant has a higher token")
    })
  )

  server.effect("S7. a waiter that gives up leaves the line at once, and the next waiter is served", () =>
    Effect.gen(function* () {
      const control = yield* ServerControl
      const namespace = uniqueNamespace("sem")
      const a = yield* Semaphore.make({ namespace })
      const b = yield* Semaphore.make({ namespace })
      const key = redisKey(namespace, "k")
      const release = yield* Deferred.make<void>()
      const holder = yield* forkUntilInside((inside) =>
        a.withPermits("k", { limit: 1, waitTimeout: "2 seconds" })(Effect.andThen(inside, Deferred.await(release)))
      )
      const impatient = yield* Effect.exit(b.withPermits("k", { limit: 1, waitTimeout: "300 millis" })(Effect.void))
      assert.strictEqual((failureOf(impatient) as { readonly _tag: string } | undefined)?._tag, "TimedOut")
      yield* eventually(
        "the impatient waiter has left the line",
        Effect.map(control.command(key, "EXISTS", `${key}:waiters`), (n) => n === 0),
        2_000
      )
      const patient = yield* Effect.forkChild(
        b.withPermits("k", { limit: 1, waitTimeout: "5 seconds" })(Effect.succeed("served"))
      )
      yield* Effect.sleep(100)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      assert.strictEqual(yield* Fiber.join(patient), "served")
    })
  )

  it.effect("S8. tryWithPermits takes free permits, and refuses when they are not", () =>
    Effect.gen(function* () {
      const semaphores = yield* Semaphore.make({ namespace: uniqueNamespace("sem") })
      const inner = yield* semaphores.tryWithPermits("k", { limit: 3, permits: 2 })(
        semaphores.tryWithPermits("k", { limit: 3, permits: 2 })(Effect.succeed("both"))
      )
      assert.deepStrictEqual(inner, Option.some(Option.none()), "two plus two of three: the second is refused")
      const both = yield* semaphores.tryWithPermits("k", { limit: 3, permits: 2 })(
        semaphores.tryWithPermits("k", { limit: 3, permits: 1 })(Effect.succeed("both"))
      )
      assert.deepStrictEqual(both, Option.some(Option.some("both")))
    })
  )

  it.effect("RW1. readers of two clients share, a writer is alone, and readers after a waiting writer wait", () =>
    Effect.gen(function* () {
      const namespace = uniqueNamespace("rw")
      const clients = yield* Effect.forEach([0, 1], () => ReadWriteLock.make({ namespace }))
      const events: Array<string> = []
      let readers = 0
      let writers = 0
      let mostReaders = 0
      let mixed = 0
      const read = (name: string, client: number) =>
        clients[client]!.withReadLock("doc", { waitTimeout: "10 seconds" })(
          Effect.acquireUseRelease(
            Effect.sync(() => {
              mostReaders = Math.max(mostReaders, ++readers)
              if (writers > 0) mixed++
              events.push(name)
            }),
            () => Effect.sleep(300),
            () => Effect.sync(() => void readers--)
          )
        )
      const write = (name: string, client: number) =>
        clients[client]!.withWriteLock("doc", { waitTimeout: "10 seconds" })(
          Effect.acquireUseRelease(
            Effect.sync(() => {
              if (++writers > 1 || readers > 0) mixed++
              events.push(name)
            }),
            () => Effect.sleep(100),
            () => Effect.sync(() => void writers--)
          )
        )
      yield* Effect.all(
        [
          read("r1", 0),
          read("r2", 1),
          Effect.andThen(Effect.sleep(100), write("w1", 1)),
          Effect.andThen(Effect.sleep(200), read("r3", 0))
        ],
        { concurrency: "unbounded" }
      )
      assert.strictEqual(mixed, 0, "a writer never overlaps a reader or another writer")
      assert.strictEqual(mostReaders, 2, "the first two readers shared")
      // r1 and r2 start together and share: either may enter first. The writer follows both, and the
      // reader that came after the waiting writer follows it.
      assert.deepStrictEqual(
        [events.slice(0, 2).toSorted(), events.slice(2)],
        [
          ["r1", "r2"],
          ["w1", "r3"]
        ],
        "the reader after the waiting writer waited for it"
      )
    })
  )

  it.effect("RW2. fencing tokens follow the order of grants across readers and writers", () =>
    Effect.gen(function* () {
      const locks = yield* ReadWriteLock.make({ namespace: uniqueNamespace("rw") })
      const token = Lease.Lease.use((lease) => Effect.succeed(lease.fencingToken))
      const read1 = yield* locks.withReadLock("k", { waitTimeout: "2 seconds" })(token)
      const write = yield* locks.withWriteLock("k", { waitTimeout: "2 seconds" })(token)
      const read2 = yield* locks.withReadLock("k", { waitTimeout: "2 seconds" })(token)
      assert.isAbove(write, read1)
      assert.isAbove(read2, write)
      const busy = yield* Effect.scoped(
        Effect.andThen(locks.acquireRead("k", { waitTimeout: "2 seconds" }), locks.tryWithWriteLock("k")(Effect.void))
      )
      assert.isTrue(Option.isNone(busy), "no writer while a reader holds the key")
    })
  )
}
