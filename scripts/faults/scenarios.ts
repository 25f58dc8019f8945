// The fault scenarios, each with the verdict it is expected to earn written beside it. IDs in
// brackets refer to the scenario table of servers-and-faults.md. "exclusion": no two bodies on one
// key may ever overlap. "violation": the fault breaks the lock by design (documented in
// docs/semantics.md, Limits), so overlaps may happen, but each must surface as `LockLost` in the
// holder that was overtaken, and at least one `LockLost` must be seen. The scenarios aimed at the
// waiting machinery (registrations, hand-offs, wake-up subscriptions) are in waiting.ts; the
// semaphore cells, made from some of these, in semaphores.ts, and the election cells in elections.ts.
import * as Effect from "effect/Effect"
import {
  ClusterMigration,
  ClusterTopology,
  Faults,
  type FaultProxy,
  type RedisServer,
  Replicated,
  SentinelTopology,
  type TestkitError
} from "@sage/lock-testkit"
import * as Deployments from "./deployments.ts"
import type { DeploymentKind } from "./deployments.ts"
import type { FaultContext, Scenario } from "./scenario.ts"
import { electionScenariosOf } from "./elections.ts"
import { semaphoreScenariosOf } from "./semaphores.ts"
import { waitingScenarios } from "./waiting.ts"

export type { Expectation, FaultContext, Scenario } from "./scenario.ts"

const all: ReadonlyArray<DeploymentKind> = Deployments.deploymentKinds
const direct: ReadonlyArray<DeploymentKind> = ["standalone", "ioredis", "cluster", "ioredis-cluster"]

const target = (context: FaultContext): Effect.Effect<RedisServer.RedisServer, TestkitError.TestkitError> =>
  context.deployment.masterFor(context.redisKeys[0] ?? "")

/** Every proxy of the given workers (default: all) in front of any node. */
const proxiesOf = (context: FaultContext, workers?: ReadonlyArray<number>): Array<FaultProxy.FaultProxy> =>
  [...context.deployment.proxies]
    .filter(([worker]) => workers === undefined || workers.includes(worker))
    .flatMap(([, byNode]) => [...byNode.values()])

const eachProxy = (
  proxies: ReadonlyArray<FaultProxy.FaultProxy>,
  f: (proxy: FaultProxy.FaultProxy) => Effect.Effect<void>
) => Effect.forEach(proxies, f, { discard: true })

/** Kills the key's master, waits for the deployment to promote another, returns the old one. */
const killMasterAndWaitForFailover = (context: FaultContext) =>
  Effect.gen(function* () {
    const old = yield* target(context)
    yield* old.kill
    const { sentinel, cluster } = context.deployment
    if (sentinel !== undefined) yield* SentinelTopology.waitForMaster(sentinel, (node) => node.port !== old.port)
    if (cluster !== undefined) {
      const key = context.redisKeys[0] ?? ""
      for (let i = 0; i < 200; i++) {
        const owner = yield* Effect.result(cluster.masterFor(key))
        if (owner._tag === "Success" && owner.success.port !== old.port) break
        yield* Effect.sleep(100)
      }
    }
    return old
  })

/**
 * Waits until the key's master lists a connected replica (`ROLE`), at most `withinMillis`, and notes how
 * long that took. With replica acknowledgement no write is confirmed before (the lock answers
 * `UNACKNOWLEDGED` and retries), so a fault has ended only once this holds. After a failover and the
 * old master's restart, the promoted Valkey 8 master has been seen with no replica for 7-9 s (Redis 7:
 * one is there at the first look): that time is the deployment's, not the lock's. If none comes, the note says so
 * and the cell goes on.
 */
const awaitAttachedReplica = (context: FaultContext, restartedAt: number, withinMillis: number) =>
  Effect.gen(function* () {
    while (Date.now() - restartedAt < withinMillis) {
      const role = yield* Effect.result(
        Effect.flatMap(Deployments.settledMasterFor(context.deployment, context.redisKeys[0] ?? ""), (master) =>
          master.command("ROLE")
        )
      )
      if (role._tag === "Success" && Array.isArray(role.success) && Array.isArray(role.success[2])) {
        if (role.success[2].length > 0) {
          return yield* context.note(`the master listed a replica ${Date.now() - restartedAt} ms after the restart`)
        }
      }
      yield* Effect.sleep(100)
    }
    yield* context.note(`no replica attached to the master within ${withinMillis} ms of the restart`)
  })

const fillerCount = 100_000

const lockScenarios: ReadonlyArray<Scenario> = [
  {
    id: "baseline",
    fault: "none (3 s of contention)",
    deployments: all,
    expect: "exclusion",
    why: "no fault",
    inject: () => Effect.sleep(3000)
  },
  {
    id: "master-stop-short",
    fault: "SIGSTOP the key's master for 1 s (< lease), SIGCONT [S1]",
    deployments: all,
    expect: "exclusion",
    why: "commands time out and are retried; renewal succeeds after SIGCONT within the usable lease",
    inject: (context) =>
      Effect.gen(function* () {
        const master = yield* target(context)
        yield* master.pause
        yield* Effect.sleep(1000).pipe(Effect.ensuring(Effect.ignore(master.resume)))
      })
  },
  {
    id: "master-stop-long",
    fault: "SIGSTOP the key's master for lease + 1.5 s, SIGCONT [S1, SE4, C5]",
    deployments: all,
    expect: "exclusion",
    why: "holders give up at the usable lease (LockLost expired, body interrupted) before the key expires; replicated: a failover happens and the resumed old master is refused by the ROLE/view check",
    inject: (context) =>
      Effect.gen(function* () {
        const master = yield* target(context)
        yield* master.pause
        yield* Effect.sleep(context.leaseMillis + 1500).pipe(Effect.ensuring(Effect.ignore(master.resume)))
      })
  },
  {
    id: "master-kill-restart-empty",
    fault: "standalone: kill -9 the server and restart it empty at once [S2]",
    deployments: ["standalone", "ioredis"],
    expect: "violation",
    lockLostRequired: true,
    why: "a restart without persistence forgets every lock (semantics.md, Limits): a new holder can enter while the old body runs, and the old holder's next renewal must report LockLost",
    inject: (context) => Effect.flatMap(target(context), (master) => master.restart)
  },
  {
    id: "master-kill-failover-restart",
    fault: "kill -9 the key's master, wait for the promotion, restart the old node empty [SE2, C10]",
    deployments: ["sentinel", "ioredis-sentinel", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    why: "with replica acknowledgement every held lock is on the promoted replica; the restarted empty node (ROLE master for ~10 s under Sentinel) is refused by the view check; under Sentinel the fault ends once the master lists a replica again",
    inject: (context) =>
      Effect.gen(function* () {
        const old = yield* killMasterAndWaitForFailover(context)
        yield* old.restart
        const restartedAt = Date.now()
        yield* Effect.sleep(2000)
        if (context.deployment.sentinel !== undefined) yield* awaitAttachedReplica(context, restartedAt, 20_000)
      })
  },
  {
    id: "client-pause-write",
    fault: "CLIENT PAUSE 1500 WRITE on the key's master [S3]",
    deployments: all,
    expect: "exclusion",
    why: "writes (and the scripts) wait out the pause; retried within the budget",
    inject: (context) =>
      Effect.gen(function* () {
        yield* Faults.clientPause(yield* target(context), 1500, "WRITE")
        yield* Effect.sleep(1500)
      })
  },
  {
    id: "client-pause-all",
    fault: "CLIENT PAUSE 1500 ALL on the key's master [S3b]",
    deployments: all,
    expect: "exclusion",
    why: "every command waits out the pause; retried within the budget",
    inject: (context) =>
      Effect.gen(function* () {
        yield* Faults.clientPause(yield* target(context), 1500, "ALL")
        yield* Effect.sleep(1500)
      })
  },
  {
    id: "debug-sleep",
    fault: "DEBUG SLEEP 1.5 on the key's master [S4]",
    deployments: all,
    expect: "exclusion",
    why: "as a short SIGSTOP (on Sentinel and Cluster it may also start a failover)",
    inject: (context) =>
      Effect.gen(function* () {
        yield* Faults.debugSleep(yield* target(context), 1.5)
        yield* Effect.sleep(1500)
      })
  },
  {
    id: "client-kill",
    fault: "CLIENT KILL TYPE normal on the key's master, 4 times, 400 ms apart [S5]",
    deployments: all,
    expect: "exclusion",
    why: "in-flight commands fail as connection errors and are retried after reconnecting; idempotent acquisition covers a lost reply",
    inject: (context) =>
      Effect.gen(function* () {
        for (let i = 0; i < 4; i++) {
          yield* Faults.killNormalClients(yield* target(context))
          yield* Effect.sleep(400)
        }
      })
  },
  {
    id: "busy-script",
    fault: "a script loops for 1.5 s on the key's master, then SCRIPT KILL [S10]",
    deployments: all,
    expect: "exclusion",
    why: "BUSY is a temporary refusal, retried within the budget",
    inject: (context) => Effect.flatMap(target(context), (master) => Faults.busyScript(master, 1500))
  },
  {
    id: "oom-noeviction",
    fault: "maxmemory below usage with noeviction for 2 s [S6b]",
    deployments: ["standalone", "ioredis", "sentinel", "ioredis-sentinel"],
    expect: "exclusion",
    expectedErrorCodes: ["OOM"],
    why: "new acquisitions fail at once with RedisError OOM; held locks keep renewing and releasing (no shebang scripts)",
    inject: (context) =>
      Effect.gen(function* () {
        const master = yield* target(context)
        yield* Faults.populate(master, fillerCount)
        yield* Faults.setMaxMemory(master, 1024 * 1024, "noeviction")
        yield* Effect.sleep(2000).pipe(
          Effect.ensuring(
            Effect.ignore(
              Effect.andThen(Faults.setMaxMemory(master, 0, "noeviction"), Faults.unpopulate(master, fillerCount))
            )
          )
        )
      })
  },
  {
    id: "eviction-volatile-ttl",
    fault: "maxmemory below usage with volatile-ttl for 2 s: the lock keys are evicted [S6]",
    deployments: ["standalone", "ioredis", "sentinel", "ioredis-sentinel"],
    expect: "violation",
    lockLostRequired: true,
    expectedErrorCodes: ["OOM"],
    why: "eviction deletes lock keys (semantics.md, Limits: use noeviction); holders must get LockLost",
    inject: (context) =>
      Effect.gen(function* () {
        // A lock held by a long body when eviction starts: its key (the shortest TTL, and filler keys
        // have none) goes first. Without one, every lock could be between holders for the whole
        // window (new writes fail with OOM), and the cell would fail for want of a LockLost.
        yield* context.holderWorker(context.longBodyMillis)
        const master = yield* target(context)
        yield* Faults.populate(master, fillerCount)
        yield* Faults.setMaxMemory(master, 1024 * 1024, "volatile-ttl")
        yield* Effect.sleep(2000).pipe(
          Effect.ensuring(
            Effect.ignore(
              Effect.andThen(Faults.setMaxMemory(master, 0, "noeviction"), Faults.unpopulate(master, fillerCount))
            )
          )
        )
      })
  },
  {
    id: "operator-delete",
    fault: "an operator DELs a key held by a long body, then that key 5 more times, 300 ms apart [S7]",
    deployments: all,
    expect: "violation",
    lockLostRequired: true,
    why: "a deleted key lets another holder in; the overtaken holder must get LockLost (ownership)",
    inject: (context) =>
      Effect.gen(function* () {
        // The first DEL aims at a held key (blind deletes can all land between two holders, and then
        // nothing was taken away: the cell would fail for want of a LockLost).
        const { redisKey } = yield* context.holderWorker(context.longBodyMillis)
        for (let i = 0; i < 6; i++) {
          yield* Faults.deleteKey(yield* context.deployment.masterFor(redisKey), redisKey)
          yield* Effect.sleep(300)
        }
      })
  },
  {
    id: "key-theft",
    fault: "another owner overwrites a key held by a long body (SET, PX 1500) [S7b]",
    deployments: all,
    expect: "violation",
    lockLostRequired: true,
    why: "the holder must get LockLost and must not delete the thief's key; the key frees itself after 1.5 s",
    inject: (context) =>
      Effect.gen(function* () {
        const { redisKey } = yield* context.holderWorker(context.longBodyMillis)
        yield* Faults.stealKey(yield* context.deployment.masterFor(redisKey), redisKey, "thief", 1500)
        yield* Effect.sleep(1500)
      })
  },
  {
    id: "acl-change",
    fault: "the workers' ACL user loses EVALSHA/EVAL for 1.5 s, then gets them back [S8]",
    deployments: direct,
    expect: "exclusion",
    expectedErrorCodes: ["NOPERM"],
    why: "NOPERM is permanent: calls fail at once with RedisError, holders whose renewal is refused get LockLost (failed) and their bodies are interrupted",
    deploymentOptions: { aclUser: true },
    inject: (context) =>
      Effect.gen(function* () {
        const nodes = context.deployment.nodes
        const set = (...rules: ReadonlyArray<string>) =>
          Effect.forEach(nodes, (node) => node.command("ACL", "SETUSER", Deployments.aclUser.username, ...rules), {
            discard: true
          })
        yield* set("-evalsha", "-eval")
        yield* Effect.sleep(1500).pipe(Effect.ensuring(Effect.ignore(set("+evalsha", "+eval"))))
      })
  },
  {
    id: "holder-paused",
    fault: "SIGSTOP a worker inside a body for lease + 1.5 s, SIGCONT [L1]",
    deployments: all,
    expect: "violation",
    lockLostRequired: true,
    why: "a paused holder outlives its lease (semantics.md, Limits); when it resumes, its call must end with LockLost",
    inject: (context) =>
      Effect.flatMap(context.holderWorker(context.longBodyMillis), ({ worker }) =>
        context.pauseWorker(worker, context.leaseMillis + 1500)
      )
  },
  {
    id: "holder-killed",
    fault: "SIGKILL a worker inside a body",
    deployments: all,
    expect: "exclusion",
    why: "the lease frees the key; the others acquire after it ends",
    inject: (context) =>
      Effect.gen(function* () {
        yield* context.killWorker((yield* context.holderWorker()).worker)
        yield* Effect.sleep(context.leaseMillis)
      })
  },
  ...waitingScenarios,
  {
    id: "proxy-latency",
    fault: "200 ms added each way for every client for 3 s [N5]",
    deployments: direct,
    expect: "exclusion",
    why: "the usable lease counts from send time, so slow replies shorten it, never stretch it",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => proxy.setLatency(200))
        yield* Effect.sleep(3000).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.setLatency(0))))
      })
  },
  {
    id: "partition-all-short",
    fault: "every client cut off for 1 s (proxy stall), then healed [P1]",
    deployments: direct,
    expect: "exclusion",
    why: "commands time out and are retried; late replies after the heal are discarded",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => proxy.stall)
        yield* Effect.sleep(1000).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.heal)))
      })
  },
  {
    id: "partition-one-holder",
    fault: "the worker holding a lock cut off for lease + 1.5 s, the other not, then healed [N1, P1]",
    deployments: direct,
    expect: "exclusion",
    why: "the cut-off holder's body is interrupted at its usable lease, before the key expires and the other worker takes it",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        const { worker } = yield* context.holderWorker(context.longBodyMillis)
        const cut = proxiesOf(context, [worker])
        yield* eachProxy(cut, (proxy) => proxy.stall)
        yield* Effect.sleep(context.leaseMillis + 1500).pipe(Effect.ensuring(eachProxy(cut, (proxy) => proxy.heal)))
      })
  },
  {
    id: "connection-reset",
    fault: "every client connection reset (RST) 4 times, 400 ms apart [N3, P3]",
    deployments: direct,
    expect: "exclusion",
    why: "connection errors are retried after reconnecting",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        for (let i = 0; i < 4; i++) {
          yield* eachProxy(proxiesOf(context), (proxy) => proxy.resetAll)
          yield* Effect.sleep(400)
        }
      })
  },
  {
    id: "lost-replies",
    fault: "one reply swallowed (then the connection reset) 6 times, 300 ms apart [N2, P2]",
    deployments: direct,
    expect: "exclusion",
    why: "the command ran but the client cannot know: acquisition is idempotent (own token means acquired), a lost release leaves the key to its lease",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        for (let i = 0; i < 6; i++) {
          yield* eachProxy(proxiesOf(context), (proxy) => proxy.loseNextReply)
          yield* Effect.sleep(300)
        }
      })
  },
  {
    id: "connection-refused",
    fault: "every connection reset and new ones refused for 1.5 s [P3]",
    deployments: direct,
    expect: "exclusion",
    why: "reconnect attempts fail; the lock's own deadlines bound every wait",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => Effect.andThen(proxy.refuse, proxy.resetAll))
        yield* Effect.sleep(1500).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.accept)))
      })
  },
  {
    id: "connection-silent",
    fault: "every connection open now goes silent (TCP up, nothing forwarded) for 9 s; new ones pass [N2, kept open]",
    deployments: direct,
    expect: "exclusion",
    why: "a connection that leaves a question unanswered for 5 s after a timeout is replaced (standalone, fenced with CLIENT KILL) or closed (Cluster's shared ones), and so is a subscriber after a wait ran out; the commands buffered in the silent ones reach the server at the heal and change nothing",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => proxy.stallOpen)
        yield* Effect.sleep(9000).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.heal)))
      })
  },
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
  {
    id: "loading",
    fault: "DEBUG RELOAD of 20,000 keys slowed to ~2.5 s: every command gets LOADING [S11b]",
    deployments: ["standalone", "ioredis", "sentinel", "ioredis-sentinel"],
    expect: "exclusion",
    why: "LOADING is temporary: acquisitions retry within waitTimeout, renewals within the usable lease; lock keys survive the reload",
    inject: (context) => Effect.flatMap(target(context), (master) => Faults.loading(master, 20_000))
  },
  {
    id: "connection-limit",
    fault: "maxclients 1 and every client connection killed on the key's master for 2 s [S12]",
    deployments: ["standalone", "ioredis", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    why:
      "ERR max number of clients reached is a connection failure, retried within the budget " +
      "(not on Sentinel: its sentinels would be refused too, and fail over)",
    inject: (context) => Effect.flatMap(target(context), (master) => Faults.connectionLimit(master, 2000))
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

export const scenarios: ReadonlyArray<Scenario> = [
  ...lockScenarios,
  ...semaphoreScenariosOf(lockScenarios),
  ...electionScenariosOf(lockScenarios)
]
