import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ClusterMigration, ClusterTopology, Replicated, ServerBinary } from "../src/index.ts"
import { isAlive, timed } from "./support.ts"

// The flavors run concurrently: the time goes into server timers (Sentinel hellos, cluster gossip,
// failover timeouts), not CPU, so this halves the file's wall time without slowing either run.
describe.concurrent("ClusterTopology", () => {
  for (const flavor of ServerBinary.flavorsUnderTest()) {
    describe(flavor, () => {
      it.live("routes keys (MOVED), migrates a slot (ASK, TRYAGAIN), fails over, restarts a node, stops all", () =>
        Effect.gen(function* () {
          const pids = yield* Effect.scoped(
            Effect.gen(function* () {
              const [ms, cluster] = yield* timed(ClusterTopology.start({ flavor }))
              yield* Effect.logInfo(`ClusterTopology.start ${flavor}: ${Math.round(ms)} ms`)
              assert.strictEqual(cluster.nodes.length, 6)
              assert.deepStrictEqual(
                cluster.rootNodes,
                cluster.nodes.map((node) => ({ host: "127.0.0.1", port: node.port }))
              )
              for (const node of cluster.nodes) {
                assert.isTrue(node.port + 10000 <= 32767, `bus port of ${node.port}`)
                assert.isTrue(Fs.existsSync(Path.join(node.dir, "nodes.conf")), `nodes.conf of ${node.port}`)
                assert.strictEqual((yield* ClusterTopology.clusterInfo(node))["cluster_state"], "ok")
              }

              // Routing: the owner accepts the write, another master redirects, the replica has it.
              const key = "{lock:a}"
              const slot = ClusterTopology.keySlot(key)
              assert.strictEqual(Number(yield* cluster.nodes[0].command("CLUSTER", "KEYSLOT", key)), slot)
              assert.strictEqual(ClusterTopology.keySlot("{lock:a}:fence"), slot)
              for (const tricky of ["", "foo", "{}bar", "{user1000}.following", "a{b}{c}", "{}{x}", "é{ü}", "a{"]) {
                const server = Number(yield* cluster.nodes[1].command("CLUSTER", "KEYSLOT", tricky))
                assert.strictEqual(ClusterTopology.keySlot(tricky), server, `keySlot(${JSON.stringify(tricky)})`)
              }
              const owner = yield* cluster.masterFor(key)
              const [, acked] = yield* owner.session([
                ["SET", key, "tok"],
                ["WAIT", "1", "500"]
              ])
              assert.strictEqual(acked, 1)
              const other = cluster.nodes.slice(0, 3).find((node) => node !== owner)!
              assert.strictEqual(String(yield* other.commandReply("GET", key)), `MOVED ${slot} 127.0.0.1:${owner.port}`)
              const replica = yield* cluster.replicaFor(key)
              assert.strictEqual(yield* Replicated.role(replica), "slave")
              const [, fromReplica] = yield* replica.session([["READONLY"], ["GET", key]])
              assert.strictEqual(fromReplica, "tok")

              // Migration of the slot from owner to other: ASK for missing keys, TRYAGAIN for mixed ones.
              yield* ClusterMigration.beginMigration(slot, owner, other)
              assert.strictEqual(yield* owner.command("GET", key), "tok")
              const missing = "{lock:a}:missing"
              assert.strictEqual(
                String(yield* owner.commandReply("GET", missing)),
                `ASK ${slot} 127.0.0.1:${other.port}`
              )
              assert.match(String(yield* owner.commandReply("MGET", key, missing)), /^TRYAGAIN/)
              assert.match(String(yield* other.commandReply("GET", missing)), /^MOVED/)
              const [, asked] = yield* other.session([["ASKING"], ["SET", missing, "x", "NX"]])
              assert.strictEqual(asked, "OK")
              assert.strictEqual(yield* ClusterMigration.migrateKeys(slot, owner, other, { keys: [key] }), 1)
              assert.strictEqual(String(yield* owner.commandReply("GET", key)), `ASK ${slot} 127.0.0.1:${other.port}`)
              yield* ClusterMigration.finishMigration(cluster, slot, owner, other)
              assert.strictEqual(yield* cluster.masterFor(key), other)
              assert.strictEqual(String(yield* owner.commandReply("GET", key)), `MOVED ${slot} 127.0.0.1:${other.port}`)
              assert.strictEqual(yield* other.command("GET", key), "tok")

              // CLUSTER FAILOVER promotes the replica of the key's (new) owner; the old owner is demoted.
              const standby = yield* cluster.replicaFor(key)
              const [failoverMs, promoted] = yield* timed(ClusterTopology.failover(cluster, standby))
              yield* Effect.logInfo(`ClusterTopology.failover ${flavor}: ${Math.round(failoverMs)} ms`)
              assert.strictEqual(promoted, standby)
              assert.strictEqual(yield* cluster.masterFor(key), standby)
              assert.strictEqual(yield* Replicated.role(other), "slave")
              assert.strictEqual(yield* standby.command("GET", key), "tok")

              // FORCE with the owner frozen; it rejoins as a replica once resumed.
              const frozen = standby
              const understudy = yield* cluster.replicaFor(key)
              yield* frozen.pause
              yield* ClusterTopology.failover(cluster, understudy, "FORCE")
              yield* frozen.resume
              yield* ClusterTopology.waitForClusterOk(cluster)
              assert.strictEqual(yield* cluster.masterFor(key), understudy)

              // A restart keeps nodes.conf: same node id, back in the cluster.
              const id = yield* ClusterTopology.nodeId(frozen)
              yield* frozen.restart
              assert.strictEqual(yield* ClusterTopology.nodeId(frozen), id)
              yield* ClusterTopology.waitForClusterOk(cluster, { replicasPerRange: 1 })

              // A whole slot moves in one call; the key follows it.
              const masters = yield* Effect.filter(cluster.nodes, (node) =>
                Effect.map(Replicated.role(node), (role) => role === "master")
              )
              assert.strictEqual(masters.length, 3)
              const destination = masters.find((node) => node !== understudy)!
              yield* ClusterMigration.migrateSlot(cluster, slot, understudy, destination)
              assert.strictEqual(yield* cluster.masterFor(key), destination)
              assert.strictEqual(yield* destination.command("GET", key), "tok")
              return cluster.nodes.map((node) => node.pid)
            })
          )
          for (const pid of pids) assert.isFalse(isAlive(pid), `pid ${pid} alive after scope close`)
        })
      )

      it.live("a long node timeout is in force on every node once formed, and on a restarted node", () =>
        Effect.gen(function* () {
          const cluster = yield* ClusterTopology.start({ flavor, nodeTimeoutMillis: 8_000 })
          const nodeTimeout = (node: (typeof cluster.nodes)[number]) =>
            Effect.map(node.command("CONFIG", "GET", "cluster-node-timeout"), (reply) =>
              Array.isArray(reply) ? Number(reply[1]) : Number.NaN
            )
          assert.deepStrictEqual(
            yield* Effect.forEach(cluster.nodes, nodeTimeout),
            cluster.nodes.map(() => 8_000)
          )
          const replica = cluster.nodes[cluster.nodes.length - 1]!
          yield* replica.restart
          assert.strictEqual(yield* nodeTimeout(replica), 8_000)
        }).pipe(Effect.scoped)
      )
    })
  }
})
