// Replica acknowledgement, ACL requirements and the dedicated pool on a Sentinel-managed master with
// two replicas, for Redis 7 and Valkey 8. The shared contract cannot see these: they depend on
// replicas, on ROLE/WAIT permissions and on the pool's size.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { clientOn, holding } from "./support.ts"
import { RedisServer, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`replica acknowledgement on ${flavor} (sentinel)`, () => {
    it.live(
      "a stalled replica: acquisition TimedOut within its budget, a held lock lost after its usable lease; without acknowledgement both proceed",
      () =>
        Effect.gen(function* () {
          const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
          const backend = yield* NodeRedisBackend.makeSentinel({
            name: topology.masterName,
            sentinels: topology.sentinelNodes
          })
          const acked = yield* clientOn(backend, { leaseDuration: "1 second" })
          const unacked = yield* clientOn(backend, { leaseDuration: "1 second", replicaAcknowledgement: false })
          const heldAcked = yield* holding(acked, "held", Effect.never)
          const heldUnacked = yield* holding(unacked, "held", Effect.never)
          const [replica] = yield* topology.replicas()
          yield* replica!.pause
          yield* Effect.addFinalizer(() => Effect.ignore(replica!.resume))

          let ran = false
          const start = Date.now()
          const timedOut = yield* Effect.sync(() => (ran = true)).pipe(
            acked.withLock("new", { waitTimeout: "800 millis" }),
            Effect.flip
          )
          const elapsed = Date.now() - start
          assert.strictEqual(timedOut._tag, "TimedOut")
          if (timedOut._tag === "TimedOut") assert.strictEqual(timedOut.reason, "unacknowledged")
          assert.isFalse(ran, "the body never started")
          assert.isBelow(elapsed, 800 + 1_000 + 1_000, "within the budget plus cleanup")

          const lost = yield* Fiber.join(heldAcked.fiber).pipe(
            Effect.timeout("5 seconds"),
            Effect.flatMap(Effect.fromResult),
            Effect.flip
          )
          assert.strictEqual(lost._tag, "LockLost")
          if (lost._tag === "LockLost") {
            assert.strictEqual(lost.reason, "expired")
            assert.strictEqual((lost.cause as { code?: string } | undefined)?.code, "UNACKNOWLEDGED")
          }

          const value = yield* Effect.succeed("fast").pipe(unacked.withLock("free", { waitTimeout: "1 second" }))
          assert.strictEqual(value, "fast", "acquisition without acknowledgement proceeds")
          yield* Effect.sleep(1_000)
          assert.isUndefined(heldUnacked.fiber.pollUnsafe(), "a held lock without acknowledgement keeps renewing")
          yield* Fiber.interrupt(heldUnacked.fiber)
        })
    )

    it.live("ROLE and WAIT need permission only on replicated deployments: NOPERM names the command at once", () =>
      Effect.gen(function* () {
        const acl = ["ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", "-wait"]
        const standalone = yield* RedisServer.start({ flavor })
        yield* standalone.command(...acl, "-role")
        const backend = yield* NodeRedisBackend.make({ url: standalone.url, username: "locker", password: "pw" })
        const lock = yield* clientOn(backend)
        assert.strictEqual(yield* Effect.succeed(1).pipe(lock.withLock("k", { waitTimeout: "1 second" })), 1)

        const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
        for (const node of topology.nodes) yield* node.command(...acl)
        const replicated = yield* NodeRedisBackend.makeSentinel({
          name: topology.masterName,
          sentinels: topology.sentinelNodes,
          nodeClientOptions: { username: "locker", password: "pw" }
        })
        const guarded = yield* clientOn(replicated)
        const start = Date.now()
        const error = yield* Effect.void.pipe(guarded.withLock("k", { waitTimeout: "5 seconds" }), Effect.flip)
        assert.strictEqual(error._tag, "LockRedisError")
        if (error._tag === "LockRedisError") {
          assert.strictEqual(error.code, "NOPERM")
          assert.include(error.reply.toLowerCase(), "wait")
        }
        assert.isBelow(Date.now() - start, 2_500, "not retried through the 5 s budget")
        const master = yield* topology.master()
        assert.isNull(yield* master.command("GET", `${guarded.namespace}:{k}`), "what was written is released")
        const unacked = yield* clientOn(replicated, { replicaAcknowledgement: false })
        assert.strictEqual(yield* Effect.succeed(2).pipe(unacked.withLock("k", { waitTimeout: "1 second" })), 2)
      })
    )

    it.live("a pool of one delays acquisition within waitTimeout and renewal within the usable lease", () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
        const backend = yield* NodeRedisBackend.makeSentinel({
          name: topology.masterName,
          sentinels: topology.sentinelNodes,
          dedicatedPool: { maxConnections: 1 }
        })
        const holder = yield* clientOn(backend, { leaseDuration: "600 millis", replicaAcknowledgement: false })
        const held = yield* holding(holder, "held", Effect.never)
        const hog = yield* clientOn(backend, { leaseDuration: "10 seconds" })
        const [replica] = yield* topology.replicas()
        yield* replica!.pause
        yield* Effect.addFinalizer(() => Effect.ignore(replica!.resume))
        // With a replica stalled, each acknowledged acquisition keeps the only connection in WAIT.
        const hogging = yield* Effect.forkChild(
          Effect.void.pipe(hog.withLock("hog", { waitTimeout: "4 seconds" }), Effect.ignore)
        )
        yield* Effect.sleep(100)
        const start = Date.now()
        const waited = yield* Effect.void.pipe(hog.withLock("other", { waitTimeout: "300 millis" }), Effect.flip)
        assert.strictEqual(waited._tag, "TimedOut", "a full pool delays acquisition until waitTimeout")
        if (waited._tag === "TimedOut") {
          assert.strictEqual((waited.lastError as { code?: string } | undefined)?.code, "POOL_EXHAUSTED")
        }
        assert.isBelow(Date.now() - start, 300 + 1_000 + 700)
        // Without acknowledgement an acquisition needs no connection of its own (no WAIT): it runs on
        // the node's shared connection, which the first acquisition of `held` opened.
        const free = yield* Effect.succeed("free").pipe(holder.withLock("free", { waitTimeout: "300 millis" }))
        assert.strictEqual(free, "free", "an unacknowledged acquisition is not held up by the full pool")
        const lost = yield* Fiber.join(held.fiber).pipe(
          Effect.timeout("5 seconds"),
          Effect.flatMap(Effect.fromResult),
          Effect.flip
        )
        assert.strictEqual(lost._tag, "LockLost", "renewal could not get a connection within the usable lease")
        yield* Fiber.interrupt(hogging)
      })
    )
  })
}
