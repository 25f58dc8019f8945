// The faults of a replicated deployment: failovers (commanded, forced, or after a kill), stalled
// sentinels and replicas, cut replication links, too few replicas to write, and a Cluster slot
// migrated under the workers.
import * as Effect from "effect/Effect"
import { ClusterMigration, ClusterTopology, Replicated, SentinelTopology } from "@sage/lock-testkit"
import { killMasterAndWaitForFailover, target } from "./injection.ts"
import type { Scenario } from "./scenario.ts"

export const failoverScenarios: ReadonlyArray<Scenario> = [
  {
    id: "sentinel-failover",
    fault: "SENTINEL FAILOVER (commanded) [SE1]",
    deployments: ["sentinel", "ioredis-sentinel"],
    expect: "exclusion",
    why: "acknowledged locks are on the promoted replica; the old master is refused by ROLE and the view",
    inject: (context) =>
      Effect.gen(function* () {
        const topology = context.deployment.sentinel
        if (topology !== undefined) yield* SentinelTopology.failover(topology)
      })
  },
  {
    id: "sentinel-failover-kill",
    fault: "kill -9 the master, Sentinel fails over on its own, until the other replica follows [SE2]",
    deployments: ["sentinel", "ioredis-sentinel"],
    expect: "exclusion",
    why: "acknowledged locks are on the promoted replica",
    // The fault ends once the surviving replica follows the promoted master: until then no write
    // can be acknowledged, so no lock with acknowledgement can be granted. Under load Sentinel took
    // more than the 4 s recovery window to get there now and then, and the cell failed on "no
    // acquisition after the fault ended" with every call unacknowledged.
    inject: (context) =>
      Effect.gen(function* () {
        const old = yield* killMasterAndWaitForFailover(context)
        const sentinel = context.deployment.sentinel
        if (sentinel === undefined) return
        const promoted = yield* sentinel.master()
        const replicas = sentinel.nodes.filter((node) => node.port !== old.port && node.port !== promoted.port)
        yield* Replicated.waitForSync({ master: promoted, replicas }, { timeoutMs: 30_000 })
      })
  },
  {
    id: "sentinel-stall",
    fault: "SIGSTOP one of the three sentinels for 3 s",
    deployments: ["sentinel", "ioredis-sentinel"],
    expect: "exclusion",
    why: "the client asks every sentinel at once; one stalled sentinel costs nothing",
    inject: (context) =>
      Effect.gen(function* () {
        const sentinel = context.deployment.sentinel?.sentinels[0]
        if (sentinel === undefined) return
        yield* sentinel.pause
        yield* Effect.sleep(3000).pipe(Effect.ensuring(Effect.ignore(sentinel.resume)))
      })
  },
  {
    id: "replica-stall",
    fault: "SIGSTOP one replica of the key's master for 2 s [R3, C7]",
    deployments: ["sentinel", "ioredis-sentinel", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    why: "WAIT cannot be satisfied: acquisitions time out unacknowledged, renewals retry within the usable lease",
    inject: (context) =>
      Effect.gen(function* () {
        const [replica] = yield* context.deployment.replicasFor(context.redisKeys[0] ?? "")
        if (replica === undefined) return
        yield* replica.pause
        yield* Effect.sleep(2000).pipe(Effect.ensuring(Effect.ignore(replica.resume)))
      })
  },
  {
    id: "replica-kill",
    fault: "kill -9 one replica of the key's master, restart it 3 s later",
    deployments: ["sentinel", "ioredis-sentinel", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    why:
      "the master lists the replicas left and they acknowledge; on Sentinel, writes wait until the " +
      "sentinels see the dead replica disconnected (a replica that left while vouched for may be a promoted one)",
    inject: (context) =>
      Effect.gen(function* () {
        const [replica] = yield* context.deployment.replicasFor(context.redisKeys[0] ?? "")
        if (replica === undefined) return
        yield* replica.kill
        yield* Effect.sleep(3000).pipe(Effect.ensuring(Effect.ignore(replica.restart)))
      })
  },
  {
    id: "replica-links-cut",
    fault: "CLIENT KILL TYPE replica on the key's master every 250 ms for 2 s: the replication links drop",
    deployments: ["sentinel", "ioredis-sentinel", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    why:
      "a write the replicas did not get is not acknowledged: acquisitions retry, renewals retry within " +
      "the usable lease; on Sentinel a replica that left the master while vouched for refuses writes until it is back",
    inject: (context) =>
      Effect.gen(function* () {
        const master = yield* target(context)
        for (let i = 0; i < 8; i++) {
          yield* master.command("CLIENT", "KILL", "TYPE", "replica")
          yield* Effect.sleep(250)
        }
      })
  },
  {
    id: "noreplicas",
    fault: "min-replicas-to-write above the replica count on the key's master for 2 s: writes get NOREPLICAS [R4]",
    deployments: ["sentinel", "ioredis-sentinel", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    why: "NOREPLICAS is temporary: acquisitions retry within waitTimeout, renewals within the usable lease",
    inject: (context) =>
      Effect.gen(function* () {
        const master = yield* target(context)
        const replicas = yield* context.deployment.replicasFor(context.redisKeys[0] ?? "")
        yield* master.command("CONFIG", "SET", "min-replicas-to-write", String(replicas.length + 1))
        yield* Effect.sleep(2000).pipe(
          Effect.ensuring(Effect.ignore(master.command("CONFIG", "SET", "min-replicas-to-write", "0")))
        )
      })
  },
  ...(["", "FORCE", "TAKEOVER"] as const).map((mode): Scenario => ({
    id: `cluster-failover${mode === "" ? "" : `-${mode.toLowerCase()}`}`,
    fault:
      mode === "FORCE"
        ? "SIGSTOP the key's master, CLUSTER FAILOVER FORCE on its replica, SIGCONT [C5]"
        : `CLUSTER FAILOVER${mode === "" ? "" : ` ${mode}`} on the key's replica [${mode === "" ? "C4" : "C6"}]`,
    deployments: ["cluster", "ioredis-cluster"],
    expect: "exclusion",
    why: "acknowledged locks are on the promoted replica; MOVED re-routes renewals",
    inject: (context) =>
      Effect.gen(function* () {
        const cluster = context.deployment.cluster
        const key = context.redisKeys[0] ?? ""
        if (cluster === undefined) return
        const master = yield* cluster.masterFor(key)
        const replica = yield* cluster.replicaFor(key)
        if (mode === "FORCE") {
          yield* master.pause
          yield* ClusterTopology.failover(cluster, replica, "FORCE").pipe(Effect.ensuring(Effect.ignore(master.resume)))
        } else {
          yield* ClusterTopology.failover(cluster, replica, mode === "" ? undefined : mode)
        }
      })
  })),
  {
    id: "slot-migration",
    fault: "the first key's slot migrated to another master with its keys [C3]",
    deployments: ["cluster", "ioredis-cluster"],
    expect: "exclusion",
    why: "ASK is followed (ASKING again before a re-sent script), MOVED waits for the new slot map; scripts over several keys get TRYAGAIN while the slot is open, retried",
    inject: (context) =>
      Effect.gen(function* () {
        const cluster = context.deployment.cluster
        const key = context.redisKeys[0] ?? ""
        if (cluster === undefined) return
        const from = yield* cluster.masterFor(key)
        const slot = ClusterTopology.keySlot(key)
        const others = yield* Effect.forEach(context.redisKeys, (k) => cluster.masterFor(k))
        const to =
          cluster.nodes
            .slice(0, 3)
            .find((node) => node.port !== from.port && !others.some((o) => o.port === node.port)) ??
          cluster.nodes.slice(0, 3).find((node) => node.port !== from.port)
        if (to === undefined) return
        yield* ClusterMigration.migrateSlot(cluster, slot, from, to)
        yield* Effect.sleep(1000)
      })
  }
]
