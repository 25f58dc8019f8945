// Cluster facts the shared contract cannot see, because its cluster has one replica per master and
// direct addresses: how many replicas WAIT asks for when a shard has several, and what
// acknowledgement does on a cluster without replicas.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { clientOn } from "./support.ts"
import { ClusterTopology, Faults, ServerBinary } from "@sage/lock-testkit"
import * as ReplicaAcknowledgement from "@sage/lock-testkit/contract/ReplicaAcknowledgement"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

describe(`cluster on ${flavor}`, () => {
  it.live("WAIT asks for every replica of the shard: one of two stalled means unacknowledged", () =>
    ReplicaAcknowledgement.everyReplicaCounts(flavor!, (topology) =>
      NodeRedisBackend.makeCluster({
        rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
      })
    )
  )

  it.live("with acknowledgement on, a deployment without replicas fails at once with NO_REPLICAS", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: flavor!, replicasPerMaster: 0, nodeTimeoutMillis: 8_000 })
      const backend = yield* NodeRedisBackend.makeCluster({
        rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
      })
      const lock = yield* clientOn(backend)
      const start = Date.now()
      const error = yield* Effect.void.pipe(lock.withLock("k", { waitTimeout: "5 seconds" }), Effect.flip)
      assert.isBelow(Date.now() - start, 1_500, "not an endless wait for replicas that do not exist")
      assert.strictEqual(error._tag, "LockRedisError")
      if (error._tag === "LockRedisError") {
        assert.strictEqual(error.code, "NO_REPLICAS")
        assert.include(error.reply, "replicaAcknowledgement: false")
      }
      const master = yield* topology.masterFor(`${lock.namespace}:{k}`)
      assert.isNull(yield* master.command("GET", `${lock.namespace}:{k}`), "what was written is released")
      const unacked = yield* clientOn(backend, { replicaAcknowledgement: false })
      assert.strictEqual(yield* Effect.succeed(1).pipe(unacked.withLock("k", { waitTimeout: "2 seconds" })), 1)
    })
  )

  it.live("nodeAddressMap carries lock traffic: a cluster reachable only through mapped addresses", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: flavor!, nodeTimeoutMillis: 8_000 })
      // Nothing listens on 127.0.0.2 (the nodes bind 127.0.0.1): the announced addresses are dead ends.
      yield* ClusterTopology.announceHostname(topology, "127.0.0.2")
      const backend = yield* NodeRedisBackend.makeCluster({
        rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
        nodeAddressMap: (address) => {
          const port = Number(address.slice(address.lastIndexOf(":") + 1))
          return address.startsWith("127.0.0.2:") ? { host: "127.0.0.1", port } : undefined
        }
      })
      const lock = yield* clientOn(backend, { leaseDuration: "1 second" })
      const value = yield* Effect.sleep(700).pipe(
        Effect.as("mapped"),
        lock.withLock("behind-nat", { waitTimeout: "3 seconds" })
      )
      assert.strictEqual(value, "mapped", "acquired, renewed and released through the mapped addresses")
      const master = yield* topology.masterFor(`${lock.namespace}:{behind-nat}`)
      assert.isNull(yield* master.command("GET", `${lock.namespace}:{behind-nat}`))
    })
  )

  it.live("a wrong password fails the layer with the nodes' own WRONGPASS, not node-redis's generic error", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: "redis7" })
      const error = yield* Effect.scoped(
        NodeRedisBackend.makeCluster({
          rootNodes: [{ url: topology.nodes[0]!.url }],
          defaults: { username: "nobody", password: "wrong" },
          connectTimeoutMillis: 5_000
        })
      ).pipe(Effect.flip, Effect.timeout("20 seconds"))
      assert.strictEqual(error._tag, "LockRedisError")
      assert.strictEqual((error as { code?: string }).code, "WRONGPASS", String(error))
    })
  )

  it.live("a root node that accepts connections and never answers: the layer fails within connectTimeoutMillis", () =>
    Effect.gen(function* () {
      // A TCP server that takes every connection and says nothing, like a stalled process behind a
      // live socket: node-redis's own connect timeout (5 s) must not be what ends the wait.
      const port = yield* Faults.silentPeer
      const start = Date.now()
      const error = yield* Effect.scoped(
        NodeRedisBackend.makeCluster({
          rootNodes: [{ url: `redis://127.0.0.1:${port}` }],
          connectTimeoutMillis: 500
        })
      ).pipe(Effect.flip, Effect.timeout("20 seconds"))
      assert.isBelow(Date.now() - start, 2_000)
      assert.strictEqual(error._tag, "LockRedisError")
    })
  )
})
