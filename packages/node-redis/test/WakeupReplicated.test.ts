// Wake-up on replicated deployments: on Sentinel the subscriber follows the master through a
// failover; on Cluster each lock's wake-up travels on its own shard (SPUBLISH/SSUBSCRIBE), whichever
// master its slot lives on.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, FaultProxy, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import {
  clientOver,
  handoff,
  median,
  namespace,
  show,
  wakeupsComeBackAfterStall,
  wokenWithinMillis
} from "@sage/lock-testkit/contract/Handoff"

/** Handoffs between two clients, alternating who holds: their median in ms, and all of them. */
const handoffs = (
  nodeFor: Parameters<typeof handoff>[0],
  a: Lock.LockClient<string>,
  b: Lock.LockClient<string>,
  keys: ReadonlyArray<string>
) =>
  Effect.gen(function* () {
    const gaps: Array<number> = []
    for (const [i, key] of keys.entries()) gaps.push(yield* handoff(nodeFor, i % 2 ? a : b, i % 2 ? b : a, key))
    return { median: median(gaps), all: show(gaps) }
  })

/**
 * Starting a topology (and, on Sentinel, a failover) takes about 12 s here, but several times that
 * when other suites load the two cores: a slow machine must not fail these tests, only a hang.
 */
const replicatedTestTimeout = 120_000

const flavors = ServerBinary.flavorsUnderTest()

for (const flavor of flavors) {
  describe(`wake-up on ${flavor} (sentinel)`, () => {
    it.live(
      "a release wakes a waiter of another process, before and after a failover",
      () =>
        Effect.gen(function* () {
          const topology = yield* SentinelTopology.start({ flavor })
          const backend = () =>
            NodeRedisBackend.makeSentinel({ name: topology.masterName, sentinels: topology.sentinelNodes })
          const a = yield* Effect.flatMap(backend(), clientOver)
          const b = yield* Effect.flatMap(backend(), clientOver)
          const onMaster = () => topology.master()
          const before = yield* handoffs(onMaster, a, b, ["s", "s", "s"])
          assert.isBelow(before.median, wokenWithinMillis, `before the failover: ${before.all}`)
          yield* SentinelTopology.failover(topology)
          // Let both clients see the new master (their first calls may still be redirected).
          yield* handoffs(onMaster, a, b, ["s"]).pipe(Effect.ignore)
          const after = yield* handoffs(onMaster, a, b, ["s", "s", "s"])
          assert.isBelow(after.median, wokenWithinMillis, `after the failover: ${after.all}`)
        }),
      replicatedTestTimeout
    )
  })

  describe(`wake-up on ${flavor} (cluster)`, () => {
    it.live(
      "each lock's wake-up reaches its waiter on its own shard, across slots and masters",
      () =>
        Effect.gen(function* () {
          const topology = yield* ClusterTopology.start({ flavor })
          const backend = () =>
            NodeRedisBackend.makeCluster({
              rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
            })
          const a = yield* Effect.flatMap(backend(), clientOver)
          const b = yield* Effect.flatMap(backend(), clientOver)
          // Keys on every master: pick them by slot owner.
          const keys: Array<string> = []
          const masters = new Set<number>()
          for (let i = 0; keys.length < 6 && i < 1000; i++) {
            const master = yield* topology.masterFor(`wake:{c${i}}`)
            if (masters.size < 3 && masters.has(master.port)) continue
            masters.add(master.port)
            keys.push(`c${i}`)
          }
          assert.strictEqual(masters.size, 3, "keys on all three masters")
          const result = yield* handoffs((lockKey) => topology.masterFor(lockKey), a, b, keys)
          assert.isBelow(result.median, wokenWithinMillis, `handoff ms: ${result.all}`)
        }),
      replicatedTestTimeout
    )

    // What is watched is the client's: one server flavor is enough, the first (the standalone case in
    // Wakeup.test.ts runs on the last).
    if (flavor === flavors[0]) {
      it.live(
        "a sharded subscriber connection that goes silent is replaced, and wake-ups resume",
        () =>
          Effect.gen(function* () {
            const topology = yield* ClusterTopology.start({ flavor })
            const a = yield* Effect.flatMap(
              NodeRedisBackend.makeCluster({
                rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
              }),
              clientOver
            )
            // The waiter reaches every node through a proxy of its own; a 5 s lease keeps the 1 s
            // backoff cap `handoff` counts on.
            const proxies = yield* Effect.forEach(topology.nodes, (node) =>
              FaultProxy.make({ upstreamPort: node.port })
            )
            const nodeAddressMap = Object.fromEntries(
              topology.nodes.map((node, i) => [`127.0.0.1:${node.port}`, { host: "127.0.0.1", port: proxies[i]!.port }])
            )
            const b = yield* Lock.make({ namespace, leaseDuration: "5 seconds" }).pipe(
              Effect.provideService(
                LockBackend,
                yield* NodeRedisBackend.makeCluster({
                  rootNodes: proxies.slice(0, 3).map((proxy) => ({ url: proxy.url })),
                  nodeAddressMap
                })
              )
            )
            // Every connection the waiter has open then forwards nothing; new ones pass. node-redis opens
            // a new sharded subscriber on the next SSUBSCRIBE once the silent one is discarded.
            const nodeFor = (lockKey: string) => topology.masterFor(lockKey)
            yield* wakeupsComeBackAfterStall(nodeFor, a, b, "q", proxies, 40_000)
          }),
        replicatedTestTimeout
      )
    }
  })
}
