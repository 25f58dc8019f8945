// Fencing tokens through a Sentinel failover (replica acknowledgement on) and a Cluster slot
// migration, for Redis 7 and Valkey 8. On one host every node shares a clock, so the server-time
// floor alone would keep tokens increasing: each test also checks that the counter itself (the
// fence key) reached the new master or moved with its slot, which is what the docs promise.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Lease, LockScripts } from "@sage/lock"
import { ClusterMigration, ClusterTopology, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { clientOn } from "./support.ts"

const assertIncreasing = (tokens: ReadonlyArray<number>): void => {
  for (let i = 1; i < tokens.length; i++) {
    if (!(tokens[i]! > tokens[i - 1]!)) assert.fail(`token ${i} (${tokens[i]}) after ${tokens[i - 1]}: ${tokens}`)
  }
}

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`fencing tokens through topology changes on ${flavor}`, () => {
    it.live("Sentinel failover with acknowledgement: the counter reaches the new master, tokens keep rising", () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor })
        const backend = yield* NodeRedisBackend.makeSentinel({
          name: topology.masterName,
          sentinels: topology.sentinelNodes
        })
        const lock = yield* clientOn(backend, { leaseDuration: "2 seconds" })
        const fenceKey = LockScripts.fenceKey(`${lock.namespace}:{fenced}`)
        const tokens: Array<number> = []
        const take = Effect.flatMap(Lease.fencingToken, (token) => Effect.sync(() => tokens.push(token))).pipe(
          lock.withLock("fenced", { waitTimeout: "20 seconds" })
        )
        yield* Effect.repeat(take, { times: 19 })
        const lastBefore = tokens[tokens.length - 1]!
        const old = yield* topology.master()
        // Acquisitions keep going while the master changes (one at a time, so array order is
        // acquisition order); failures during the switch are fine, a wrong token is not.
        const state = { running: true }
        const during = yield* Effect.forkChild(
          Effect.gen(function* () {
            while (state.running) yield* Effect.ignore(take)
          })
        )
        const promoted = yield* SentinelTopology.failover(topology)
        assert.notStrictEqual(promoted.port, old.port)
        const onPromoted = Number(yield* promoted.command("GET", fenceKey))
        assert.isAtLeast(onPromoted, lastBefore, "the acknowledged counter is on the promoted replica")
        state.running = false
        yield* Fiber.join(during)
        yield* Effect.repeat(take, { times: 19 })
        assert.isAtLeast(tokens.length, 40)
        assertIncreasing(tokens)
        assert.strictEqual(
          String(yield* promoted.command("GET", fenceKey)),
          String(tokens[tokens.length - 1]),
          "the new master issues from the counter"
        )
      })
    )

    it.live("Cluster slot migration: the counter moves with the slot, tokens keep rising throughout", () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor })
        const backend = yield* NodeRedisBackend.makeCluster({
          rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
        })
        const lock = yield* clientOn(backend, { leaseDuration: "1 second" })
        const key = `${lock.namespace}:{moving}`
        const fenceKey = LockScripts.fenceKey(key)
        const slot = ClusterTopology.keySlot(key)
        assert.strictEqual(ClusterTopology.keySlot(fenceKey), slot, "the fence key shares the lock's slot")
        const from = yield* topology.masterFor(key)
        const destination = (yield* topology.shardForSlot((slot + 8192) % ClusterTopology.slotCount)).master
        assert.notStrictEqual(destination.port, from.port)
        const tokens: Array<number> = []
        const state = { running: true }
        const worker = yield* Effect.forkChild(
          Effect.gen(function* () {
            while (state.running) {
              yield* Effect.flatMap(Lease.fencingToken, (token) => Effect.sync(() => tokens.push(token))).pipe(
                lock.withLock("moving", { waitTimeout: "4 seconds" }),
                Effect.ignore
              )
            }
          })
        )
        yield* Effect.sleep(300)
        yield* ClusterMigration.beginMigration(slot, from, destination)
        yield* Effect.sleep(500)
        yield* ClusterMigration.migrateKeys(slot, from, destination)
        yield* Effect.sleep(500)
        yield* ClusterMigration.finishMigration(topology, slot, from, destination)
        const countAtFinish = tokens.length
        yield* Effect.sleep(500)
        state.running = false
        yield* Fiber.join(worker)
        assert.strictEqual((yield* topology.masterFor(key)).port, destination.port, "the slot really moved")
        assert.isAbove(tokens.length, countAtFinish, "acquisitions after the move")
        assertIncreasing(tokens)
        assert.strictEqual(
          String(yield* destination.command("GET", fenceKey)),
          String(tokens[tokens.length - 1]),
          "the counter lives on the slot's new master"
        )
      })
    )
  })
}
