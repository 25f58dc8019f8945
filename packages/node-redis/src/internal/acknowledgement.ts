// Replica acknowledgement after an applied write (or a batch of them) on one dedicated connection:
// `WAIT` for the replicas, judged against what the client's view and the master itself (`ROLE`)
// list. Shared by single operations (replicated.ts) and batched renewal (replicatedRenewal.ts).
import * as Effect from "effect/Effect"
import { RedisError } from "@sage/lock/LockError"
import { replicatedFailure as failure, type Send } from "./commands.ts"

const noReplicas = (address: string): RedisError =>
  new RedisError({
    command: "WAIT",
    kind: "server",
    code: "NO_REPLICAS",
    reply:
      `the master ${address} has no replicas, so replica acknowledgement can never succeed: ` +
      "add replicas, or set replicaAcknowledgement: false",
    retryable: false,
    mayHaveExecuted: true
  })

/**
 * Waits until the replicas confirm every write made so far on `connection`, within `waitMillis`.
 *
 * Every replica that both the client's view (`viewReplicas`) and the master itself (its `role`
 * reply) list is waited for, and at least one: right after a failover the new master has fewer
 * replicas than the view remembers, and a master that lists none (restarted empty, isolated) must
 * not pass with `WAIT 0`. When neither knows a replica, the deployment has none and waiting could
 * only end in a timeout: `NO_REPLICAS`, at once, naming the way out.
 */
export const awaitReplicas = (
  connection: { readonly address: string; readonly send: Send },
  viewReplicas: number,
  role: unknown,
  waitMillis: number
): Effect.Effect<void, RedisError> =>
  Effect.suspend(() => {
    const connected = Array.isArray(role) && Array.isArray(role[2]) ? role[2].length : 0
    if (viewReplicas === 0 && connected === 0) return Effect.fail(noReplicas(connection.address))
    const wanted = Math.max(1, Math.min(viewReplicas, connected))
    const millis = Math.floor(waitMillis)
    if (millis < 1) return Effect.fail(failure("UNACKNOWLEDGED", "no time left to wait for replicas", true))
    return Effect.flatMap(connection.send(["WAIT", String(wanted), String(millis)], millis + 100), (acks) =>
      typeof acks === "number" && acks >= wanted
        ? Effect.void
        : Effect.fail(
            failure("UNACKNOWLEDGED", `${String(acks)} of ${wanted} replica(s) acknowledged within ${millis} ms`, true)
          )
    )
  })
