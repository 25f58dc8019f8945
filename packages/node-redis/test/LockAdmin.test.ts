// The admin API on real servers: inspecting a held lock (remaining lease, fencing token, waiters),
// listing a namespace with SCAN (on every master of a Cluster), and forcing a lock free only with an
// explicit flag.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { Lease, Lock, LockScripts } from "@sage/lock"
import { ClusterTopology, RedisServer, SentinelTopology } from "@sage/lock-testkit"
import * as LockAdmin from "../src/LockAdmin.ts"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { connectClient, connectCluster, connectSentinel } from "./clients.ts"

describe("LockAdmin", () => {
  it.live("inspects a held lock, lists the namespace, and forces a lock free only when told to", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const client = yield* connectClient(server.url)
      // The backend lives as long as the test: each client is made over it.
      const backend = yield* Layer.build(NodeRedisBackend.layer({ url: server.url }))
      const lock = yield* Lock.make({ namespace: "admin", leaseDuration: "5 seconds" }).pipe(Effect.provide(backend))
      const key = LockScripts.lockKey("admin", "job:1")
      assert.strictEqual(key, "admin:{job:1}")

      const free = yield* LockAdmin.inspect(client, key)
      assert.isFalse(free.held)
      assert.strictEqual(free.waiters, 0)

      const inside = yield* Deferred.make<number>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Lease.Lease.use((lease) =>
        Effect.andThen(Deferred.succeed(inside, lease.fencingToken), Deferred.await(release))
      ).pipe(lock.withLock("job:1", { waitTimeout: "5 seconds" }), Effect.forkChild)
      const token = yield* Deferred.await(inside)
      const other = yield* Lock.make({ namespace: "admin", leaseDuration: "5 seconds" }).pipe(Effect.provide(backend))
      const waiter = yield* other.withLock("job:1", { waitTimeout: "10 seconds" })(Effect.void).pipe(Effect.forkChild)
      yield* Effect.sleep("300 millis")

      const held = yield* LockAdmin.inspect(client, key)
      assert.isTrue(held.held)
      assert.isAbove(held.remainingMillis!, 0)
      assert.isAtMost(held.remainingMillis!, 5_000)
      assert.strictEqual(held.lastFencingToken, token, "the holder's fencing token")
      assert.strictEqual(held.waiters, 1, "the other client is registered as waiting")

      yield* lock.withLock("job:2", { waitTimeout: "1 second" })(Effect.void)
      const listed = yield* LockAdmin.list(client, "admin")
      assert.deepStrictEqual(
        listed.map((info) => [info.key, info.held]),
        [
          ["admin:{job:1}", true],
          ["admin:{job:2}", false]
        ],
        "a released lock is listed while its fencing token is kept"
      )
      assert.deepStrictEqual(yield* LockAdmin.list(client, "other"), [])

      const refused = yield* LockAdmin.forceRelease(client, key, {} as never).pipe(Effect.flip)
      assert.strictEqual(refused._tag, "InvalidArgument")
      assert.isTrue((yield* LockAdmin.inspect(client, key)).held, "nothing was released without the flag")
      assert.isTrue(yield* LockAdmin.forceRelease(client, key, { force: true }))
      // The waiter finds the lock free at its next poll; the holder loses it at its next renewal.
      yield* Fiber.join(waiter)
      const lost = yield* Fiber.join(holder).pipe(Effect.flip)
      assert.strictEqual(lost._tag, "LockLost")
      const after = yield* LockAdmin.inspect(client, key)
      assert.isAbove(after.lastFencingToken!, token, "tokens keep increasing after a forced release")
      yield* Deferred.succeed(release, undefined)
    })
  )

  it.live("counts only the waiters whose registration has not lapsed", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const client = yield* connectClient(server.url)
      const key = LockScripts.lockKey("admin", "queue")
      const [, waiters, waitingUntil] = LockScripts.keysOf(key)
      // The queue as the scripts keep it (docs/admin.md): a waiter that died a second ago is still
      // in line until the next script purges it; the other refreshes its registration.
      const now = yield* Effect.promise(() => client.sendCommand(["TIME"]))
      const nowMillis = Number((now as unknown as Array<string>)[0]) * 1000
      yield* Effect.promise(() => client.sendCommand(["ZADD", waiters, "1", "dead", "2", "alive"]))
      yield* Effect.promise(() =>
        client.sendCommand([
          "ZADD",
          waitingUntil,
          String(nowMillis - 1_000),
          "dead",
          String(nowMillis + 60_000),
          "alive"
        ])
      )
      const info = yield* LockAdmin.inspect(client, key)
      assert.isFalse(info.held)
      assert.strictEqual(info.waiters, 1, "the lapsed registration is not counted")
      const listed = yield* LockAdmin.list(client, "admin")
      assert.deepStrictEqual(
        listed.map((one) => [one.key, one.waiters]),
        [[key, 1]]
      )
    })
  )

  it.live("rejects keys that are not lock keys, and time limits that are not positive and finite", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const client = yield* connectClient(server.url)
      for (const key of ["plain", "ns:{}", "ns:{a}:fence"]) {
        const error = yield* LockAdmin.inspect(client, key).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidArgument", key)
      }
      const error = yield* LockAdmin.list(client, "").pipe(Effect.flip)
      assert.strictEqual(error._tag, "InvalidArgument")
      // A time limit that is not a positive, finite number would fire at once or never.
      const key = LockScripts.lockKey("admin", "t")
      for (const timeoutMillis of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, "100" as never]) {
        for (const call of [
          Effect.asVoid(LockAdmin.inspect(client, key, { timeoutMillis })),
          Effect.asVoid(LockAdmin.list(client, "admin", { timeoutMillis })),
          Effect.asVoid(LockAdmin.forceRelease(client, key, { force: true, timeoutMillis }))
        ]) {
          const refused = yield* Effect.flip(call)
          assert.strictEqual(refused._tag, "InvalidArgument", String(timeoutMillis))
          assert.strictEqual((refused as { field?: string }).field, "timeoutMillis")
        }
      }
      assert.isFalse((yield* LockAdmin.inspect(client, key, { timeoutMillis: 500 })).held, "a valid limit is taken")
    })
  )

  it.live("lists the locks of a namespace on every master of a Cluster", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: "redis7", nodeTimeoutMillis: 8_000 })
      const cluster = yield* connectCluster(topology)
      const backend = yield* Layer.build(NodeRedisBackend.layerFromCluster(cluster))
      const lock = yield* Lock.make({ namespace: "admin", leaseDuration: "5 seconds" }).pipe(Effect.provide(backend))
      const names = Array.from({ length: 12 }, (_, i) => `k${i}`)
      const masters = new Set<string>()
      for (const name of names) {
        masters.add((yield* topology.masterFor(LockScripts.lockKey("admin", name))).url)
        yield* lock.withLock(name, { waitTimeout: "2 seconds" })(Effect.void)
      }
      assert.isAbove(masters.size, 1, "the keys spread over several masters")
      const listed = yield* LockAdmin.list(cluster, "admin")
      assert.deepStrictEqual(
        listed.map((info) => info.key),
        names.map((name) => `admin:{${name}}`).toSorted()
      )
      const inspected = yield* LockAdmin.inspect(cluster, LockScripts.lockKey("admin", "k3"))
      assert.isFalse(inspected.held)
      assert.isDefined(inspected.lastFencingToken)
    })
  )

  // A Sentinel client's sendCommand takes (isReadonly, args): the admin functions must not pass it
  // a standalone client's (args) and must read the master, where the lock's keys are written.
  it.live("inspects, lists and forces a lock free through a Sentinel client", () =>
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor: "redis7", downAfterMillis: 8_000 })
      const sentinel = yield* connectSentinel(topology)
      const backend = yield* Layer.build(NodeRedisBackend.layerFromSentinel(sentinel))
      const lock = yield* Lock.make({ namespace: "admin", leaseDuration: "5 seconds" }).pipe(Effect.provide(backend))
      const key = LockScripts.lockKey("admin", "s1")
      const inside = yield* Deferred.make<number>()
      const holder = yield* Lease.Lease.use((lease) =>
        Effect.andThen(Deferred.succeed(inside, lease.fencingToken), Effect.never)
      ).pipe(lock.withLock("s1", { waitTimeout: "5 seconds" }), Effect.forkChild)
      const token = yield* Deferred.await(inside)
      yield* lock.withLock("s2", { waitTimeout: "2 seconds" })(Effect.void)

      const held = yield* LockAdmin.inspect(sentinel, key)
      assert.isTrue(held.held)
      assert.isAbove(held.remainingMillis!, 0)
      assert.strictEqual(held.lastFencingToken, token)
      assert.deepStrictEqual(
        (yield* LockAdmin.list(sentinel, "admin")).map((info) => [info.key, info.held]),
        [
          ["admin:{s1}", true],
          ["admin:{s2}", false]
        ]
      )
      assert.isTrue(yield* LockAdmin.forceRelease(sentinel, key, { force: true }))
      assert.isFalse((yield* LockAdmin.inspect(sentinel, key)).held)
      assert.isFalse(yield* LockAdmin.forceRelease(sentinel, key, { force: true }), "nothing left to release")
      const lost = yield* Fiber.join(holder).pipe(Effect.flip)
      assert.strictEqual(lost._tag, "LockLost")
    })
  )
})
