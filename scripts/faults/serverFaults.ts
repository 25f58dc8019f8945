// The faults of the server a cell's keys live on: stopped, paused, put to sleep, killed and
// restarted, out of memory, loading, out of connections, and an operator's hand on its keys or its
// ACL. Listed first in scenarios.ts.
import * as Effect from "effect/Effect"
import { Faults } from "@sage/lock-testkit"
import { all, awaitAttachedReplica, direct, killMasterAndWaitForFailover, setWorkersAcl, target } from "./injection.ts"
import type { Scenario } from "./scenario.ts"

const fillerCount = 100_000

export const serverScenarios: ReadonlyArray<Scenario> = [
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
        yield* setWorkersAcl(context, "-evalsha", "-eval")
        yield* Effect.sleep(1500).pipe(Effect.ensuring(Effect.ignore(setWorkersAcl(context, "+evalsha", "+eval"))))
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
  }
]
