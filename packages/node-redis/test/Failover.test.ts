// Failover and resharding on real Sentinel and Cluster topologies, for Redis 7 and Valkey 8: what
// happens to a held lock when the master changes, with and without replica acknowledgement, and
// what callers see while a slot moves between masters.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { clientOn, holding } from "./support.ts"
import { ClusterMigration, ClusterTopology, Replicated, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

/** Waits (up to 20 s) until the cluster reports a master other than `port` for `key`'s slot. */
const waitUntilOwnerIsNot = (topology: ClusterTopology.ClusterTopology, key: string, port: number) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200; i++) {
      const owner = yield* Effect.result(topology.masterFor(key))
      if (owner._tag === "Success" && owner.success.port !== port) return owner.success
      yield* Effect.sleep(100)
    }
    return yield* Effect.die(new Error(`no new master for ${key} within 20 s`))
  })

const clusterBackend = (topology: ClusterTopology.ClusterTopology) =>
  NodeRedisBackend.makeCluster({
    rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
  })

/**
 * Three fibers repeatedly take one lock with a short body; returns an Effect that waits for them and
 * reports the most bodies ever inside at once and how many completed.
 */
const racers = (backend: LockBackend["Service"], lock: Lock.LockClient<string>) =>
  Effect.gen(function* () {
    let inside = 0
    let maxInside = 0
    let completed = 0
    // Each racer has its own client (as its own process would), so they contend at the server.
    const racer = Effect.flatMap(
      Lock.make({ namespace: lock.namespace, leaseDuration: lock.leaseDuration }).pipe(
        Effect.provideService(LockBackend, backend)
      ),
      (client) =>
        Effect.gen(function* () {
          inside++
          maxInside = Math.max(maxInside, inside)
          yield* Effect.sleep(20)
        }).pipe(
          Effect.ensuring(Effect.sync(() => inside--)),
          Effect.tap(() => Effect.sync(() => completed++)),
          client.withLock("contended", { waitTimeout: "10 seconds" }),
          Effect.ignore,
          Effect.repeat({ times: 30 })
        )
    )
    const fiber = yield* Effect.forkChild(Effect.all([racer, racer, racer], { concurrency: 3 }))
    return Effect.map(Fiber.join(fiber), () => ({ maxInside, completed }))
  })

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`failover on ${flavor} (sentinel)`, () => {
    it.live("with acknowledgement, a held lock survives a failover and renewal continues on the new master", () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor })
        const backend = yield* NodeRedisBackend.makeSentinel({
          name: topology.masterName,
          sentinels: topology.sentinelNodes
        })
        // The lease must outlast the failover (renewals fail while the master switches): 8 s.
        const lock = yield* clientOn(backend, { leaseDuration: "8 seconds" })
        const held = yield* holding(lock, "survivor", Effect.sleep("10 seconds").pipe(Effect.as("done")))
        // Meanwhile, acquisitions race the failover on another key: no body may overlap another.
        const racing = yield* racers(backend, lock)
        const old = yield* topology.master()
        const promoted = yield* SentinelTopology.failover(topology)
        assert.notStrictEqual(promoted.port, old.port)
        assert.isNotNull(
          yield* promoted.command("GET", `${lock.namespace}:{survivor}`),
          "the acknowledged lock is on the promoted replica"
        )
        const result = yield* Fiber.join(held.fiber)
        assert.strictEqual(result._tag, "Success", JSON.stringify(result))
        assert.isNull(yield* promoted.command("GET", `${lock.namespace}:{survivor}`), "released on the new master")
        const race = yield* racing
        assert.strictEqual(race.maxInside, 1, "no two bodies overlapped during the failover")
        assert.isAbove(race.completed, 0)
      })
    )

    it.live("without acknowledgement, a lock whose write never reached a replica is lost at failover", () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor })
        const backend = yield* NodeRedisBackend.makeSentinel({
          name: topology.masterName,
          sentinels: topology.sentinelNodes
        })
        const lock = yield* clientOn(backend, { leaseDuration: "15 seconds", replicaAcknowledgement: false })
        const acked = yield* clientOn(backend, { leaseDuration: "15 seconds" })
        const master = yield* topology.master()
        const replicas = yield* topology.replicas()
        // Freeze the replicas and cut their links, so the next write exists only on the master.
        for (const replica of replicas) yield* replica.pause
        yield* Replicated.cutReplicationLinks(master)
        const refused = yield* Effect.void.pipe(
          acked.withLock("unreplicated", { waitTimeout: "1 second" }),
          Effect.flip
        )
        assert.strictEqual(refused._tag, "TimedOut", "with acknowledgement the same acquisition is refused")
        const held = yield* holding(lock, "unreplicated", Effect.never)
        yield* master.kill
        for (const replica of replicas) yield* replica.resume
        yield* SentinelTopology.waitForMaster(topology, (node) => node.port !== master.port, { timeoutMs: 20_000 })
        const result = yield* Fiber.join(held.fiber).pipe(Effect.timeout("20 seconds"))
        assert.strictEqual(result._tag, "Failure")
        if (result._tag === "Failure") {
          assert.strictEqual(result.failure._tag, "LockLost")
          if (result.failure._tag === "LockLost") assert.strictEqual(result.failure.reason, "ownership")
        }
        assert.isTrue(held.interrupted(), "the body was interrupted")
      })
    )
  })

  describe(`failover and resharding on ${flavor} (cluster)`, () => {
    it.live("with acknowledgement, a held lock survives CLUSTER FAILOVER, and bodies never overlap meanwhile", () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor })
        const backend = yield* clusterBackend(topology)
        const lock = yield* clientOn(backend, { leaseDuration: "2 seconds" })
        const key = `${lock.namespace}:{survivor}`
        const held = yield* holding(lock, "survivor", Effect.sleep("4 seconds").pipe(Effect.as("done")))
        const racing = yield* racers(backend, lock)
        const replica = yield* topology.replicaFor(key)
        yield* ClusterTopology.failover(topology, replica)
        const result = yield* Fiber.join(held.fiber)
        assert.strictEqual(result._tag, "Success", JSON.stringify(result))
        const race = yield* racing
        assert.strictEqual(race.maxInside, 1, "no two bodies overlapped")
        assert.isAbove(race.completed, 0)
      })
    )

    // On one flavor: the path is the client's, and the crash and the return take about 15 s.
    if (flavor === ServerBinary.flavorsUnderTest()[0]) {
      it.live(
        "with acknowledgement, a lock held while its master crashes outlives the failover and the old node's return",
        () =>
          Effect.gen(function* () {
            const topology = yield* ClusterTopology.start({ flavor })
            const backend = yield* clusterBackend(topology)
            // A lease long enough for the failure detection, the promotion and the old node's return.
            const lock = yield* clientOn(backend, { leaseDuration: "15 seconds" })
            const key = `${lock.namespace}:{crash}`
            const master = yield* topology.masterFor(key)
            const release = yield* Deferred.make<void>()
            const held = yield* holding(lock, "crash", Deferred.await(release))
            yield* master.kill
            // Renewals fail while the master is down, then go to the promoted replica once the
            // client's view has it: the lock must outlive the gap, and the old node's return.
            yield* waitUntilOwnerIsNot(topology, key, master.port)
            // Renewals reach the promoted master for a while before the old node returns.
            yield* Effect.sleep(3_000)
            yield* master.restart
            yield* ClusterTopology.waitForClusterOk(topology, { replicasPerRange: 1, timeoutMs: 20_000 })
            // Past a renewal period (5 s) with the old master back as the only replica.
            yield* Effect.sleep(6_000)
            yield* Deferred.succeed(release, undefined)
            const result = yield* Fiber.join(held.fiber)
            assert.strictEqual(result._tag, "Success", JSON.stringify(result))
            assert.isFalse(held.interrupted())
          }),
        90_000
      )
    }

    it.live("resharding a slot while locks on it are acquired, renewed and released leaks no error but TimedOut", () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor })
        const backend = yield* clusterBackend(topology)
        // A lease with room for a renewal that meets MOVED to wait for the slot map to be re-read,
        // which takes a new connection: a few hundred ms when the machine is busy.
        const lock = yield* clientOn(backend, { leaseDuration: "2 seconds" })
        const key = `${lock.namespace}:{moving}`
        const slot = ClusterTopology.keySlot(key)
        const from = yield* topology.masterFor(key)
        // Another master: the owner of a slot far from ours.
        const destination = (yield* topology.shardForSlot((slot + 8192) % ClusterTopology.slotCount)).master
        assert.notStrictEqual(destination.port, from.port)
        const outcomes: Array<string> = []
        const state = { running: true }
        const worker = Effect.gen(function* () {
          while (state.running) {
            // Bodies outlive two renewal periods, so renewals run while the slot moves.
            const result = yield* Effect.sleep(1_500).pipe(
              lock.withLock("moving", { waitTimeout: "4 seconds" }),
              Effect.result
            )
            outcomes.push(
              result._tag === "Success"
                ? "ok"
                : result.failure._tag === "LockLost"
                  ? `LockLost(${result.failure.reason}: ${String(result.failure.cause)})`
                  : result.failure._tag
            )
          }
        })
        const workers = yield* Effect.forkChild(Effect.all([worker, worker], { concurrency: 2 }))
        yield* Effect.sleep(800)
        yield* ClusterMigration.beginMigration(slot, from, destination)
        yield* Effect.sleep(1_500)
        yield* ClusterMigration.migrateKeys(slot, from, destination)
        yield* Effect.sleep(1_500)
        yield* ClusterMigration.finishMigration(topology, slot, from, destination)
        yield* Effect.sleep(2_000)
        state.running = false
        yield* Fiber.join(workers)
        const unexpected = outcomes.filter((o) => o !== "ok" && o !== "TimedOut")
        assert.deepStrictEqual(unexpected, [], `outcomes: ${outcomes.join(",")}`)
        assert.isAtLeast(outcomes.filter((o) => o === "ok").length, 3)
        assert.strictEqual((yield* topology.masterFor(key)).port, destination.port, "the slot really moved")
      })
    )

    it.live("on a slot half-migrated to a node that never ran the lock scripts, renew and check follow ASK", () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor })
        const backend = yield* clusterBackend(topology)
        const key = "ask-noscript:{half}"
        const slot = ClusterTopology.keySlot(key)
        const from = yield* topology.masterFor(key)
        const destination = (yield* topology.shardForSlot((slot + 8192) % ClusterTopology.slotCount)).master
        const lease = (acknowledge: boolean) => ({
          key,
          token: "half-token",
          leaseMillis: 10_000,
          timeoutMillis: 3_000,
          acknowledge
        })
        assert.strictEqual((yield* backend.acquire(lease(true)))._tag, "Acquired")
        yield* ClusterMigration.beginMigration(slot, from, destination)
        yield* ClusterMigration.migrateKeys(slot, from, destination)
        // The source has the key no more and answers ASK; the importing node answers NOSCRIPT, and the
        // script's source must go with ASKING again, or that node answers MOVED back to the source.
        // (Scripts over several keys get TRYAGAIN here until the slot settles: Redis's own rule.)
        const flushed = <A, E>(effect: Effect.Effect<A, E>) =>
          Effect.andThen(destination.command("SCRIPT", "FLUSH"), effect)
        assert.isTrue(yield* flushed(backend.renew(lease(false))), "renew, alone")
        assert.isTrue(yield* flushed(backend.renew(lease(true))), "renew, acknowledged")
        assert.deepStrictEqual(yield* flushed(backend.renewAll!([lease(true)])), [true], "renew, batched")
        assert.isTrue(yield* flushed(backend.check(lease(false))), "check")
        yield* ClusterMigration.finishMigration(topology, slot, from, destination)
        assert.isTrue(yield* backend.release(lease(false)), "released on the new owner")
        assert.isFalse(yield* backend.check(lease(false)))
      })
    )
  })
}
