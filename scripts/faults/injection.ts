// The steps the fault scenarios' injections are made of: the deployments a fault applies to, the
// node that serves a cell's first key, the proxies in front of the workers, and a failover waited
// out to its end.
import * as Effect from "effect/Effect"
import { type FaultProxy, type RedisServer, SentinelTopology, type TestkitError } from "@sage/lock-testkit"
import * as Deployments from "./deployments.ts"
import type { DeploymentKind } from "./deployments.ts"
import type { FaultContext } from "./scenario.ts"

export const all: ReadonlyArray<DeploymentKind> = Deployments.deploymentKinds
export const direct: ReadonlyArray<DeploymentKind> = ["standalone", "ioredis", "cluster", "ioredis-cluster"]

export const target = (context: FaultContext): Effect.Effect<RedisServer.RedisServer, TestkitError.TestkitError> =>
  context.deployment.masterFor(context.redisKeys[0] ?? "")

/** Every proxy of the given workers (default: all) in front of any node. */
export const proxiesOf = (context: FaultContext, workers?: ReadonlyArray<number>): Array<FaultProxy.FaultProxy> =>
  [...context.deployment.proxies]
    .filter(([worker]) => workers === undefined || workers.includes(worker))
    .flatMap(([, byNode]) => [...byNode.values()])

export const eachProxy = (
  proxies: ReadonlyArray<FaultProxy.FaultProxy>,
  f: (proxy: FaultProxy.FaultProxy) => Effect.Effect<void>
) => Effect.forEach(proxies, f, { discard: true })

/** Kills the key's master, waits for the deployment to promote another, returns the old one. */
export const killMasterAndWaitForFailover = (context: FaultContext) =>
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
export const awaitAttachedReplica = (context: FaultContext, restartedAt: number, withinMillis: number) =>
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

/** Applies ACL `rules` to the workers' user on every node of the deployment (`ACL SETUSER`). */
export const setWorkersAcl = (context: FaultContext, ...rules: ReadonlyArray<string>) =>
  Effect.forEach(
    context.deployment.nodes,
    (node) => node.command("ACL", "SETUSER", Deployments.aclUser.username, ...rules),
    { discard: true }
  )
