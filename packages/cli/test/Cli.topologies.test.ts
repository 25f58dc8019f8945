// sage-lock on the replicated deployments: the inspect / list / release and leader / watch scenarios through Sentinel
// (--sentinel, --master) and Cluster (--cluster, listing every master), and what only these flags can
// get wrong (a master name the sentinels do not know). One topology per deployment for the file.
import { assert, describe, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { LockScripts } from "@sage/lock"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, SentinelTopology } from "@sage/lock-testkit"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import { fails, inspectListRelease, leaderAndWatch, namespace, succeeds } from "./harness.ts"

class Sentinel extends Context.Service<Sentinel, SentinelTopology.SentinelTopology>()("@sage/lock-cli/test/Sentinel") {}
class Cluster extends Context.Service<Cluster, ClusterTopology.ClusterTopology>()("@sage/lock-cli/test/Cluster") {}

// Long failure detection: nothing here should ever trigger a failover.
const SentinelLive = Layer.effect(Sentinel, SentinelTopology.start({ flavor: "redis7", downAfterMillis: 8_000 }))
const ClusterLive = Layer.effect(Cluster, ClusterTopology.start({ flavor: "redis7", nodeTimeoutMillis: 8_000 }))

const addresses = (nodes: ReadonlyArray<{ readonly host: string; readonly port: number }>) =>
  nodes.map(({ host, port }) => `${host}:${port}`).join(",")

layer(SentinelLive, { excludeTestServices: true, timeout: "30 seconds" })("sage-lock through Sentinel", (it) => {
  it.effect("inspects, lists, refuses to release without --force and releases with it", () =>
    Effect.gen(function* () {
      const topology = yield* Sentinel
      const backend = yield* NodeRedisBackend.makeSentinel({
        name: topology.masterName,
        sentinels: topology.sentinelNodes
      })
      yield* inspectListRelease(
        ["--sentinel", addresses(topology.sentinelNodes), "--master", topology.masterName],
        backend
      )
    })
  )

  it.effect("leader and watch through Sentinel", () =>
    Effect.gen(function* () {
      const topology = yield* Sentinel
      const backend = yield* NodeRedisBackend.makeSentinel({
        name: topology.masterName,
        sentinels: topology.sentinelNodes
      })
      yield* leaderAndWatch(["--sentinel", addresses(topology.sentinelNodes), "--master", topology.masterName], backend)
    })
  )

  it.effect("a master name the sentinels do not know fails within --timeout", () =>
    Effect.gen(function* () {
      const topology = yield* Sentinel
      const message = yield* fails([
        "list",
        "--sentinel",
        addresses(topology.sentinelNodes),
        "--master",
        "no-such-master",
        "--timeout",
        "1"
      ])
      assert.include(message, `master "no-such-master" of sentinels`)
    })
  )
})

layer(ClusterLive, { excludeTestServices: true, timeout: "30 seconds" })("sage-lock on a Cluster", (it) => {
  it.effect("inspects, lists, refuses to release without --force and releases with it", () =>
    Effect.gen(function* () {
      const topology = yield* Cluster
      const backend = yield* NodeRedisBackend.makeCluster({
        rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
      })
      // One root node is enough: the client learns the others from it.
      yield* inspectListRelease(["--cluster", addresses(topology.rootNodes.slice(0, 1))], backend)
    })
  )

  it.effect("leader and watch on a Cluster", () =>
    Effect.gen(function* () {
      const topology = yield* Cluster
      const backend = yield* NodeRedisBackend.makeCluster({
        rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
      })
      yield* leaderAndWatch(["--cluster", addresses(topology.rootNodes.slice(0, 1))], backend)
    })
  )

  it.effect("a wrong user or password says WRONGPASS, not only that no root node was available", () =>
    Effect.gen(function* () {
      const topology = yield* Cluster
      const message = yield* fails(
        ["list", "--cluster", addresses(topology.rootNodes.slice(0, 1)), "--user", "nobody"],
        {
          SAGE_LOCK_PASSWORD: "wrong-secret"
        }
      )
      assert.include(message, "WRONGPASS")
      assert.notInclude(message, "wrong-secret")
    })
  )

  it.effect("lists the locks of every master", () =>
    Effect.gen(function* () {
      const topology = yield* Cluster
      const ns = namespace("spread")
      const backend = yield* NodeRedisBackend.makeCluster({
        rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
      })
      const lock = yield* Lock.make({ namespace: ns }).pipe(Effect.provideService(LockBackend, backend))
      const names = Array.from({ length: 8 }, (_, i) => `k${i}`)
      const masters = new Set<number>()
      for (const name of names) {
        masters.add((yield* topology.masterFor(LockScripts.lockKey(ns, name))).port)
        yield* lock.withLock(name, { waitTimeout: "2 seconds" })(Effect.void)
      }
      assert.isAbove(masters.size, 1, "the keys spread over several masters")
      const listed = JSON.parse(
        yield* succeeds(["list", "--json", "--cluster", addresses(topology.rootNodes), "--namespace", ns])
      )
      assert.deepStrictEqual(
        listed.map((lock: { key: string }) => lock.key),
        names,
        "every lock, from every master, in key order"
      )
    })
  )
})

describe("sage-lock on replicated deployments over TLS only (--tls, --ca)", () => {
  it.live(
    "through Sentinel: sentinels and nodes over TLS",
    () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor: "redis7", downAfterMillis: 8_000, tls: true })
        const certificates = topology.certificates!
        const tls = { socket: { tls: true as const, ca: certificates.ca } }
        const backend = yield* NodeRedisBackend.makeSentinel({
          name: topology.masterName,
          sentinels: topology.sentinelNodes,
          sentinelClientOptions: tls,
          nodeClientOptions: tls
        })
        const sentinel = ["--sentinel", addresses(topology.sentinelNodes), "--master", topology.masterName]
        yield* inspectListRelease([...sentinel, "--tls", "--ca", certificates.caFile], backend)
        // Without --tls the sentinels never answer in a language the client speaks.
        assert.include(yield* fails(["list", ...sentinel, "--timeout", "1"]), "cannot connect to")
      }),
    60_000
  )

  it.live(
    "on a Cluster: every node over TLS",
    () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor: "redis7", nodeTimeoutMillis: 8_000, tls: true })
        const certificates = topology.certificates!
        const backend = yield* NodeRedisBackend.makeCluster({
          rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `rediss://${host}:${port}` })),
          defaults: { socket: { tls: true, ca: certificates.ca } }
        })
        const cluster = ["--cluster", addresses(topology.rootNodes.slice(0, 1))]
        yield* inspectListRelease([...cluster, "--tls", "--ca", certificates.caFile], backend)
        assert.include(yield* fails(["list", ...cluster, "--timeout", "1"]), "cannot connect to")
      }),
    60_000
  )
})
