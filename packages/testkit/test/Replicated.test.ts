import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Replicated, ServerBinary } from "../src/index.ts"
import { isAlive, timed } from "./support.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`Replicated (${flavor})`, () => {
    it.live("a write on the master reaches both replicas; WAIT counts them; the scope stops every node", () =>
      Effect.gen(function* () {
        const pids = yield* Effect.scoped(
          Effect.gen(function* () {
            const [ms, topology] = yield* timed(Replicated.start({ flavor }))
            yield* Effect.logInfo(`Replicated.start ${flavor}: ${Math.round(ms)} ms`)
            const { master, replicas } = topology
            const [first] = replicas
            assert.strictEqual(replicas.length, 2)
            assert.deepStrictEqual(topology.nodes, [master, ...replicas])
            assert.strictEqual(yield* Replicated.role(master), "master")
            for (const replica of replicas) assert.strictEqual(yield* Replicated.role(replica), "slave")
            assert.strictEqual((yield* Replicated.replicationInfo(master))["connected_slaves"], "2")

            // WAIT counts only the writes of its own connection, hence one session for SET and WAIT.
            const [, acked] = yield* master.session([
              ["SET", "rep:a", "v1"],
              ["WAIT", "2", "300"]
            ])
            assert.strictEqual(acked, 2)
            yield* Replicated.waitForSync(topology)
            for (const replica of replicas) assert.strictEqual(yield* replica.command("GET", "rep:a"), "v1")
            assert.match(String(yield* first.commandReply("SET", "rep:a", "x")), /^READONLY/)

            // One frozen replica: WAIT 2 can only count the other one.
            yield* Replicated.stopReplica(first)
            const [, partial] = yield* master.session([
              ["SET", "rep:b", "v2"],
              ["WAIT", "2", "300"]
            ])
            assert.strictEqual(partial, 1)
            yield* Replicated.resumeReplica(first)
            yield* Replicated.waitForSync(topology)
            assert.strictEqual(yield* first.command("GET", "rep:b"), "v2")
            return topology.nodes.map((node) => node.pid)
          })
        )
        for (const pid of pids) assert.isFalse(isAlive(pid), `pid ${pid} alive after scope close`)
      })
    )

    it.live("frozen replicas + cut links + master killed: the unacknowledged write is lost", () =>
      Effect.gen(function* () {
        const { master, replicas } = yield* Replicated.start({ flavor })
        yield* Effect.forEach(replicas, Replicated.stopReplica)
        assert.strictEqual(yield* Replicated.cutReplicationLinks(master), 2)
        const [, acked] = yield* master.session([
          ["SET", "rep:lost", "tok"],
          ["WAIT", "1", "300"]
        ])
        assert.strictEqual(acked, 0)
        yield* master.kill
        yield* Effect.forEach(replicas, Replicated.resumeReplica)
        for (const replica of replicas) assert.isNull(yield* replica.command("GET", "rep:lost"))
        // Promoting a replica by hand (as a failover would) yields a master without the write.
        yield* replicas[0].command("REPLICAOF", "NO", "ONE")
        yield* Replicated.waitForRole(replicas[0], "master", { timeoutMs: 2000 })
        assert.strictEqual(yield* replicas[0].command("SET", "rep:lost", "other", "NX"), "OK")
      })
    )
  })
}
