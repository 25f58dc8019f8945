import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Replicated, SentinelTopology, ServerBinary } from "../src/index.ts"
import { isAlive, timed } from "./support.ts"

// The flavors run concurrently: the time goes into server timers (Sentinel hellos, cluster gossip,
// failover timeouts), not CPU, so this halves the file's wall time without slowing either run.
describe.concurrent("SentinelTopology", () => {
  for (const flavor of ServerBinary.flavorsUnderTest()) {
    describe(flavor, () => {
      it.live("starts, replicates, fails over on request (twice) and after a crash, and stops every process", () =>
        Effect.gen(function* () {
          const pids = yield* Effect.scoped(
            Effect.gen(function* () {
              const [ms, topology] = yield* timed(SentinelTopology.start({ flavor }))
              yield* Effect.logInfo(`SentinelTopology.start ${flavor}: ${Math.round(ms)} ms`)
              assert.strictEqual(topology.masterName, "mymaster")
              assert.strictEqual(topology.nodes.length, 3)
              assert.strictEqual(topology.sentinels.length, 3)
              assert.deepStrictEqual(
                topology.sentinelNodes,
                topology.sentinels.map((sentinel) => ({ host: "127.0.0.1", port: sentinel.port }))
              )
              for (const sentinel of topology.sentinels) {
                assert.strictEqual(yield* Replicated.role(sentinel), "sentinel")
                assert.include(Fs.readFileSync(Path.join(sentinel.dir, "sentinel.conf"), "utf8"), "sentinel monitor")
                // Formed with fast hellos; the tests then run with Sentinel's default period.
                const timings = yield* sentinel.command("SENTINEL", "DEBUG")
                const period = Array.isArray(timings) ? timings[timings.indexOf("PUBLISH-PERIOD") + 1] : undefined
                assert.strictEqual(period, "2000")
              }

              const master = yield* topology.master()
              assert.strictEqual(master, topology.nodes[0])
              const replicas = yield* topology.replicas()
              assert.deepStrictEqual(replicas, topology.nodes.slice(1))
              const [, acked] = yield* master.session([
                ["SET", "se:a", "v1"],
                ["WAIT", "2", "500"]
              ])
              assert.strictEqual(acked, 2)
              for (const replica of replicas) assert.strictEqual(yield* replica.command("GET", "se:a"), "v1")

              const [failoverMs, promoted] = yield* timed(SentinelTopology.failover(topology))
              yield* Effect.logInfo(`SentinelTopology.failover ${flavor}: ${Math.round(failoverMs)} ms`)
              assert.notStrictEqual(promoted.port, master.port)
              assert.strictEqual(yield* Replicated.role(promoted), "master")
              assert.strictEqual((yield* topology.master()).port, promoted.port)
              assert.strictEqual(yield* promoted.command("GET", "se:a"), "v1")
              // Sentinel converts the old master only at its next INFO poll (~10 s): a stale master meanwhile.
              assert.strictEqual(yield* Replicated.role(master), "master")

              // A second failover right away (INPROG until the first one ends), settling every node at once.
              const [settleMs, settled] = yield* timed(SentinelTopology.failover(topology, { repointNodes: true }))
              yield* Effect.logInfo(`SentinelTopology.failover + repointNodes ${flavor}: ${Math.round(settleMs)} ms`)
              assert.notStrictEqual(settled.port, promoted.port)
              for (const node of topology.nodes.filter((node) => node !== settled)) {
                assert.strictEqual(yield* Replicated.role(node), "slave")
              }
              const [, ackedBoth] = yield* settled.session([
                ["SET", "se:b", "v2"],
                ["WAIT", "2", "500"]
              ])
              assert.strictEqual(ackedBoth, 2)

              // A crash of the master: Sentinel fails over by itself (down-after 1000 ms).
              yield* settled.kill
              const [autoMs, next] = yield* timed(
                SentinelTopology.waitForMaster(topology, (node) => node.port !== settled.port)
              )
              yield* Effect.logInfo(`SentinelTopology automatic failover ${flavor}: ${Math.round(autoMs)} ms`)
              assert.strictEqual(yield* next.command("GET", "se:b"), "v2")
              return [...topology.nodes, ...topology.sentinels].map((server) => server.pid).filter((pid) => pid > 0)
            })
          )
          // 3 data nodes and 3 sentinels; the killed master's pid stays recorded.
          assert.strictEqual(pids.length, 6)
          for (const pid of pids) assert.isFalse(isAlive(pid), `pid ${pid} alive after scope close`)
        })
      )
    })
  }
})
