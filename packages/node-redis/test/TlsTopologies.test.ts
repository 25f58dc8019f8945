// Sentinel and Cluster over TLS, configured as docs/topologies.md says: every data node, every
// sentinel and the cluster bus speak TLS only (the test kit's TLS topologies, one CA for all), with
// replica acknowledgement on, so replication runs over TLS as well. Two clients contend for keys
// (wake-ups included) and their bodies never overlap. A client without TLS is refused within its
// connect timeout, so these tests cannot pass over plain TCP by accident. One flavor per topology
// (the flavors take turns), to keep CI within its time budget.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

const flavors = ServerBinary.flavorsUnderTest()
const flavorAt = (i: number): ServerBinary.Flavor => flavors[i % flavors.length] ?? "redis7"

/** Two fibers in each of the clients loop on `key`: no two bodies overlap and every call gets the lock. */
const contend = (backends: ReadonlyArray<LockBackend["Service"]>, key: string) =>
  Effect.gen(function* () {
    const locks = yield* Effect.forEach(backends, (backend) =>
      Lock.make({ namespace: "tls", leaseDuration: "5 seconds" }).pipe(Effect.provideService(LockBackend, backend))
    )
    let inside = 0
    let mostInside = 0
    let entered = 0
    const body = Effect.gen(function* () {
      inside++
      entered++
      mostInside = Math.max(mostInside, inside)
      yield* Effect.sleep(10)
      inside--
    })
    yield* Effect.forEach(
      locks.flatMap((lock) => [lock, lock]),
      (lock) =>
        Effect.gen(function* () {
          for (let i = 0; i < 5; i++) yield* body.pipe(lock.withLock(key, { waitTimeout: "20 seconds" }))
        }),
      { concurrency: "unbounded", discard: true }
    )
    assert.strictEqual(mostInside, 1, `bodies on ${key} overlapped`)
    assert.strictEqual(entered, 5 * 2 * backends.length)
  })

describe("replicated deployments over TLS only", () => {
  const sentinelFlavor = flavorAt(0)
  it.live(
    `Sentinel (${sentinelFlavor}): sentinels and nodes over TLS, acknowledgement on, exclusion between two clients`,
    () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor: sentinelFlavor, tls: true })
        const ca = topology.certificates?.ca
        assert.isDefined(ca)
        const tls = { socket: { tls: true as const, ca } }
        const connect = NodeRedisBackend.makeSentinel({
          name: topology.masterName,
          sentinels: topology.sentinelNodes,
          sentinelClientOptions: tls,
          nodeClientOptions: tls
        })
        yield* contend([yield* connect, yield* connect], "tls-sentinel")
        const plain = yield* Effect.flip(
          NodeRedisBackend.makeSentinel({
            name: topology.masterName,
            sentinels: topology.sentinelNodes,
            connectTimeoutMillis: 2000
          })
        )
        assert.strictEqual(plain._tag, "LockRedisError", "plain TCP to TLS-only sentinels is refused")
      }),
    60_000
  )

  const clusterFlavor = flavorAt(1)
  it.live(
    `Cluster (${clusterFlavor}): every node and the bus over TLS, acknowledgement on, exclusion on keys of several slots`,
    () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor: clusterFlavor, tls: true })
        const ca = topology.certificates?.ca
        assert.isDefined(ca)
        const connect = NodeRedisBackend.makeCluster({
          rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `rediss://${host}:${port}` })),
          defaults: { socket: { tls: true, ca } }
        })
        const backends = [yield* connect, yield* connect]
        const keys = ["tls-a", "tls-b", "tls-c"]
        assert.isAbove(new Set(keys.map((key) => ClusterTopology.keySlot(`tls:{${key}}`))).size, 1)
        yield* Effect.forEach(keys, (key) => contend(backends, key), { concurrency: "unbounded", discard: true })
        const plain = yield* Effect.flip(
          NodeRedisBackend.makeCluster({
            rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
            connectTimeoutMillis: 2000
          })
        )
        assert.strictEqual(plain._tag, "LockRedisError", "plain TCP to TLS-only nodes is refused")
      }),
    60_000
  )
})
