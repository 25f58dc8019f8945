// The Cluster topology over a client's slot map: routes by slot, and what it remembers of each
// slot's replicas across a failover (the map lists healthy replicas only).
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import { slotOf } from "../src/internal/replicated/cluster/slot.ts"
import { type Shard, slotMapTopology } from "../src/internal/replicated/cluster/slotMap.ts"

/** A slot map the test rewrites: every slot served by `current.shard`. */
const scripted = () => {
  const current: { shard: Shard | undefined } = { shard: { master: "127.0.0.1:7000", replicas: 1 } }
  const topology = slotMapTopology(
    { shard: () => current.shard, reread: () => Promise.resolve() },
    "scripted cluster",
    undefined
  )
  return { current, topology }
}

describe("slot map topology", () => {
  it("routes a key to its slot's master, with the replicas the map lists", () => {
    const { topology } = scripted()
    const route = Result.getOrThrow(topology.route("k"))
    assert.strictEqual(route.address, "127.0.0.1:7000")
    assert.strictEqual(route.replicas, 1)
    assert.isTrue(topology.isMaster("k", "127.0.0.1:7000"))
    assert.isFalse(topology.isMaster("k", "127.0.0.1:7001"))
  })

  it("a promoted master listed without replicas keeps the count the slot had: its writes wait, not NO_REPLICAS", () => {
    const { current, topology } = scripted()
    Result.getOrThrow(topology.route("k"))
    // The failover: the replica is master now, and the old master is failed, so not listed.
    current.shard = { master: "127.0.0.1:7001", replicas: 0 }
    const after = Result.getOrThrow(topology.route("k"))
    assert.strictEqual(after.address, "127.0.0.1:7001")
    assert.strictEqual(after.replicas, 0)
    assert.strictEqual(after.knownReplicas, 1)
  })

  it("a slot that never showed a replica knows none, and a slot no master serves is CLUSTERDOWN", () => {
    const { current, topology } = scripted()
    current.shard = { master: "127.0.0.1:7000", replicas: 0 }
    assert.strictEqual(Result.getOrThrow(topology.route("k")).knownReplicas, 0)
    current.shard = undefined
    const unserved = topology.route("k")
    assert.isTrue(Result.isFailure(unserved))
    if (Result.isFailure(unserved)) {
      assert.strictEqual(unserved.failure.code, "CLUSTERDOWN")
      assert.include(unserved.failure.reply, `slot ${slotOf("k")}`)
    }
  })
})
