// The semaphore admin API on real servers: a semaphore's holders, permits, leases and line read
// atomically, listing a namespace (a lock's key left out), and releasing one holder only when told
// to, with its permits going to the waiter in line.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { Lease, Lock, LockScripts, Semaphore } from "@sage/lock"
import { RedisServer } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import * as SemaphoreAdmin from "../src/SemaphoreAdmin.ts"
import { connectClient } from "./clients.ts"

describe("SemaphoreAdmin", () => {
  it.live("inspects holders and waiters, lists the namespace, and releases one holder only when told to", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const client = yield* connectClient(server.url)
      const backend = yield* Layer.build(NodeRedisBackend.layer({ url: server.url }))
      const semaphores = yield* Semaphore.make({ namespace: "pool", leaseDuration: "5 seconds" }).pipe(
        Effect.provide(backend)
      )
      const key = LockScripts.lockKey("pool", "gpus")

      const unused = yield* SemaphoreAdmin.inspect(client, key)
      assert.deepStrictEqual([unused.limit, unused.used, unused.holders, unused.waiters], [undefined, 0, [], []])

      const entered = yield* Deferred.make<number>()
      const stay = yield* Deferred.make<void>()
      const holder = yield* Lease.Lease.use((lease) =>
        Effect.andThen(Deferred.succeed(entered, lease.fencingToken), Deferred.await(stay))
      ).pipe(semaphores.withPermits("gpus", { limit: 3, permits: 2, waitTimeout: "2 seconds" }), Effect.forkChild)
      const fencingToken = yield* Deferred.await(entered)
      const waiter = yield* semaphores
        .withPermits("gpus", { limit: 3, permits: 2, waitTimeout: "10 seconds" })(Effect.succeed("served"))
        .pipe(Effect.forkChild)
      yield* Effect.sleep("300 millis")

      const busy = yield* SemaphoreAdmin.inspect(client, key)
      assert.strictEqual(busy.limit, 3)
      assert.strictEqual(busy.used, 2)
      assert.strictEqual(busy.holders.length, 1)
      const [held] = busy.holders
      assert.strictEqual(held!.permits, 2)
      assert.strictEqual(held!.fencingToken, fencingToken)
      assert.isTrue(held!.remainingMillis > 3_000 && held!.remainingMillis <= 5_000, `${held!.remainingMillis} ms`)
      assert.deepStrictEqual(
        busy.waiters.map((w) => w.permits),
        [2],
        "the second caller waits for two"
      )
      assert.strictEqual(busy.lastFencingToken, fencingToken)

      // A lock in the same namespace is not a semaphore: listed by LockAdmin, left out here.
      const lock = yield* Lock.make({ namespace: "pool" }).pipe(Effect.provide(backend))
      yield* lock.withLock("a-lock", { waitTimeout: "1 second" })(Effect.void)
      const listed = yield* SemaphoreAdmin.list(client, "pool")
      assert.deepStrictEqual(
        listed.map((info) => info.key),
        [key]
      )
      // A held lock's key is a string: not a semaphore, said so.
      const notSemaphore = yield* Effect.scoped(
        Effect.andThen(
          lock.acquire("a-lock", { waitTimeout: "1 second" }),
          SemaphoreAdmin.inspect(client, LockScripts.lockKey("pool", "a-lock")).pipe(Effect.flip)
        )
      )
      assert.strictEqual(notSemaphore._tag, "InvalidArgument")

      const refused = yield* SemaphoreAdmin.forceRelease(client, key, held!.token, {} as never).pipe(Effect.flip)
      assert.strictEqual(refused._tag, "InvalidArgument")
      assert.isTrue(yield* SemaphoreAdmin.forceRelease(client, key, held!.token, { force: true }))
      assert.strictEqual(yield* Fiber.join(waiter), "served", "the released permits went to the waiter")
      assert.isFalse(yield* SemaphoreAdmin.forceRelease(client, key, held!.token, { force: true }), "already released")
      const lost = yield* Fiber.await(holder)
      assert.strictEqual(lost._tag, "Failure", "the holder found its permits gone")
    })
  )
})
