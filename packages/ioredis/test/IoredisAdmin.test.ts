// The admin functions over ioredis clients on real servers: a held lock and a busy semaphore inspected,
// listed and forced free through a standalone client, a Cluster (SCAN on every master; a forced
// semaphore release wakes its waiter on the key's shard) and a Sentinel-mode client; bad input and a
// refused command read as the node-redis admin functions read them.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Redis } from "ioredis"
import { Lease, Lock, LockScripts, Semaphore } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, RedisServer, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as IoredisAdmin from "../src/IoredisAdmin.ts"
import * as IoredisBackend from "../src/IoredisBackend.ts"
import { ownedClient, ownedCluster } from "./targets.ts"

const flavor = ServerBinary.flavorsUnderTest()[0]!

/** A lock body that says its fencing token, then stays until interrupted or its lock is lost. */
const holdOn = (inside: Deferred.Deferred<number>) =>
  Lease.Lease.use((lease) => Effect.andThen(Deferred.succeed(inside, lease.fencingToken), Effect.never))

describe(`IoredisAdmin on ${flavor}`, () => {
  it.live("inspects, lists and forces free a lock and a semaphore holder through a standalone client", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const redis = yield* ownedClient(server.url)
      const backend = yield* IoredisBackend.make({ port: server.port, host: "127.0.0.1" })
      const provide = Effect.provideService(LockBackend, backend)
      const lock = yield* provide(Lock.make({ namespace: "admin", leaseDuration: "5 seconds" }))
      const other = yield* provide(Lock.make({ namespace: "admin", leaseDuration: "5 seconds" }))
      const key = LockScripts.lockKey("admin", "job:1")

      assert.isFalse((yield* IoredisAdmin.inspectLock(redis, key)).held)
      const inside = yield* Deferred.make<number>()
      const holder = yield* holdOn(inside).pipe(lock.withLock("job:1", { waitTimeout: "5 seconds" }), Effect.forkChild)
      const token = yield* Deferred.await(inside)
      const waiter = yield* other.withLock("job:1", { waitTimeout: "10 seconds" })(Effect.void).pipe(Effect.forkChild)
      yield* Effect.sleep("300 millis")
      const held = yield* IoredisAdmin.inspectLock(redis, key)
      assert.deepStrictEqual([held.key, held.held, held.lastFencingToken, held.waiters], [key, true, token, 1])
      assert.isTrue(held.remainingMillis! > 0 && held.remainingMillis! <= 5_000, `${held.remainingMillis} ms`)
      yield* lock.withLock("job:2", { waitTimeout: "1 second" })(Effect.void)
      assert.deepStrictEqual(
        (yield* IoredisAdmin.listLocks(redis, "admin")).map((info) => [info.key, info.held]),
        [
          ["admin:{job:1}", true],
          ["admin:{job:2}", false]
        ]
      )
      const notSemaphore = yield* Effect.flip(IoredisAdmin.inspectSemaphore(redis, key))
      assert.strictEqual(notSemaphore._tag, "InvalidArgument", "a held lock's key is no semaphore")
      const refused = yield* Effect.flip(IoredisAdmin.forceReleaseLock(redis, key, {} as never))
      assert.strictEqual(refused._tag, "InvalidArgument")
      assert.isTrue(yield* IoredisAdmin.forceReleaseLock(redis, key, { force: true }))
      assert.strictEqual((yield* Effect.flip(Fiber.join(holder)))._tag, "LockLost", "the holder found its lock gone")
      yield* Fiber.join(waiter)

      const semaphores = yield* provide(Semaphore.make({ namespace: "pool", leaseDuration: "5 seconds" }))
      const gpus = LockScripts.lockKey("pool", "gpus")
      const entered = yield* Deferred.make<number>()
      const permitHolder = yield* holdOn(entered).pipe(
        semaphores.withPermits("gpus", { limit: 3, permits: 2, waitTimeout: "2 seconds" }),
        Effect.forkChild
      )
      const fencingToken = yield* Deferred.await(entered)
      const permitWaiter = yield* semaphores
        .withPermits("gpus", { limit: 3, permits: 2, waitTimeout: "10 seconds" })(Effect.succeed("served"))
        .pipe(Effect.forkChild)
      yield* Effect.sleep("300 millis")
      const busy = yield* IoredisAdmin.inspectSemaphore(redis, gpus)
      assert.deepStrictEqual([busy.limit, busy.used, busy.lastFencingToken], [3, 2, fencingToken])
      assert.deepStrictEqual(
        busy.holders.map((h) => [h.permits, h.fencingToken]),
        [[2, fencingToken]]
      )
      assert.deepStrictEqual(
        busy.waiters.map((w) => w.permits),
        [2]
      )
      assert.deepStrictEqual(
        (yield* IoredisAdmin.listSemaphores(redis, "pool")).map((info) => info.key),
        [gpus]
      )
      const token0 = busy.holders[0]!.token
      assert.isTrue(yield* IoredisAdmin.forceReleaseSemaphore(redis, gpus, token0, { force: true }))
      assert.strictEqual(yield* Fiber.join(permitWaiter), "served", "the released permits went to the waiter")
      assert.isFalse(yield* IoredisAdmin.forceReleaseSemaphore(redis, gpus, token0, { force: true }))
      assert.strictEqual((yield* Effect.flip(Fiber.join(permitHolder)))._tag, "LockLost")
    })
  )

  it.live("refuses what is not a lock key or a time limit, and reads a refused command as the server's reply", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const redis = yield* ownedClient(server.url)
      for (const [effect, field] of [
        [IoredisAdmin.inspectLock(redis, "no-braces"), "key"],
        [IoredisAdmin.inspectSemaphore(redis, "admin:{a}", { timeoutMillis: 0 }), "timeoutMillis"],
        [IoredisAdmin.listLocks(redis, "a{b}"), "namespace"],
        [IoredisAdmin.forceReleaseSemaphore(redis, "pool:{gpus}", "", { force: true }), "token"]
      ] as const) {
        const refused = yield* Effect.flip(effect as Effect.Effect<unknown, { _tag: string; field?: string }>)
        assert.strictEqual(refused._tag, "InvalidArgument", field)
        assert.strictEqual(refused.field, field)
      }
      yield* server.command("ACL", "SETUSER", "no-scan", "on", ">pw", "~*", "+@all", "-scan")
      const limited = yield* ownedClient(server.url.replace("redis://", "redis://no-scan:pw@"))
      const denied = yield* Effect.flip(IoredisAdmin.listLocks(limited, "admin"))
      assert.strictEqual(denied._tag, "LockRedisError")
      assert.strictEqual((denied as { code?: string }).code, "NOPERM")
    })
  )

  it.live("through a Cluster: lists the locks on every master, and a forced release wakes the waiter", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor, replicasPerMaster: 0 })
      const cluster = yield* ownedCluster(topology.rootNodes)
      const backend = yield* IoredisBackend.makeCluster(topology.rootNodes)
      const provide = Effect.provideService(LockBackend, backend)
      const lock = yield* provide(Lock.make({ namespace: "admin", replicaAcknowledgement: false }))
      const names = Array.from({ length: 12 }, (_, i) => `k${i}`)
      const masters = new Set<number>()
      for (const name of names) {
        yield* lock.withLock(name, { waitTimeout: "2 seconds" })(Effect.void)
        masters.add((yield* topology.masterFor(LockScripts.lockKey("admin", name))).port)
      }
      assert.strictEqual(masters.size, 3, "the keys are on all three masters")
      assert.deepStrictEqual(
        (yield* IoredisAdmin.listLocks(cluster, "admin")).map((info) => info.key),
        names.map((name) => LockScripts.lockKey("admin", name)).toSorted()
      )

      // The waiter listens on the key's shard; the forced release's SPUBLISH hands it the permits.
      const semaphores = yield* provide(
        Semaphore.make({ namespace: "pool", leaseDuration: "30 seconds", replicaAcknowledgement: false })
      )
      const entered = yield* Deferred.make<number>()
      const permitHolder = yield* holdOn(entered).pipe(
        semaphores.withPermits("gpus", { limit: 1, waitTimeout: "2 seconds" }),
        Effect.forkChild
      )
      yield* Deferred.await(entered)
      const permitWaiter = yield* semaphores
        .withPermits("gpus", { limit: 1, waitTimeout: "20 seconds" })(Effect.succeed("served"))
        .pipe(Effect.forkChild)
      yield* Effect.sleep("300 millis")
      const gpus = LockScripts.lockKey("pool", "gpus")
      const busy = yield* IoredisAdmin.inspectSemaphore(cluster, gpus)
      assert.strictEqual(busy.waiters.length, 1)
      const master = yield* topology.masterFor(gpus)
      const sharded = master
        .command("INFO", "commandstats")
        .pipe(Effect.map((info) => Number(/cmdstat_spublish:calls=(\d+)/.exec(String(info))?.[1] ?? 0)))
      const before = yield* sharded
      assert.isTrue(yield* IoredisAdmin.forceReleaseSemaphore(cluster, gpus, busy.holders[0]!.token, { force: true }))
      assert.strictEqual(yield* Fiber.join(permitWaiter), "served")
      assert.isAbove(yield* sharded, before, "the release published on the key's shard")
      assert.strictEqual((yield* Effect.flip(Fiber.join(permitHolder)))._tag, "LockLost")
    })
  )

  it.live("through a client made with sentinels: commands go to the master", () =>
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
      const redis = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const client = new Redis({ sentinels: [...topology.sentinelNodes], name: topology.masterName })
          client.on("error", () => {})
          return client
        }),
        (client) => Effect.sync(() => client.disconnect())
      )
      const backend = yield* IoredisBackend.make({ sentinels: [...topology.sentinelNodes], name: topology.masterName })
      const lock = yield* Lock.make({ namespace: "admin" }).pipe(Effect.provideService(LockBackend, backend))
      const inside = yield* Deferred.make<number>()
      const holder = yield* holdOn(inside).pipe(lock.withLock("s1", { waitTimeout: "5 seconds" }), Effect.forkChild)
      const token = yield* Deferred.await(inside)
      const key = LockScripts.lockKey("admin", "s1")
      const held = yield* IoredisAdmin.inspectLock(redis, key)
      assert.deepStrictEqual([held.held, held.lastFencingToken], [true, token])
      assert.deepStrictEqual(
        (yield* IoredisAdmin.listLocks(redis, "admin")).map((info) => info.key),
        [key]
      )
      assert.isTrue(yield* IoredisAdmin.forceReleaseLock(redis, key, { force: true }))
      assert.strictEqual((yield* Effect.flip(Fiber.join(holder)))._tag, "LockLost")
    })
  )
})
