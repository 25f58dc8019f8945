// Replica acknowledgement after an applied write (or a batch of them) on one dedicated connection:
// `WAIT` for the replicas, judged against what the client's view and the master itself (`ROLE`)
// list. Shared by single operations (replicated.ts) and batched renewal (replicatedRenewal.ts).
import * as Effect from "effect/Effect"
import { LockRedisError } from "@sage/lock/LockError"
import { replicatedFailure as failure, type Send } from "./commands.ts"

const noReplicas = (address: string): LockRedisError =>
  new LockRedisError({
    command: "WAIT",
    kind: "server",
    code: "NO_REPLICAS",
    reply:
      `the master ${address} has no replicas, so replica acknowledgement can never succeed: ` +
      "add replicas, or set replicaAcknowledgement: false",
    retryable: false,
    mayHaveExecuted: true
  })

/** How many replicas the master lists as connected in its `ROLE` reply. */
export const connectedReplicas = (role: unknown): number =>
  Array.isArray(role) && Array.isArray(role[2]) ? role[2].length : 0

/** How long a `WAIT` sent together with the write may block before the lock asks again. */
const earlyWaitMillis = 100

/**
 * The `WAIT` to send in the same round trip as a write, before the master's `ROLE` reply is known:
 * for the replicas the view lists, or fewer when the master listed fewer last time (`lastConnected`);
 * without a view (a shared client that keeps no replica list), for those the master last listed.
 * It blocks at most 100 ms: if it guessed wrong (the replica set changed) or the replicas are slow,
 * `awaitReplicas` asks again with the right count and the rest of the budget.
 */
export const earlyWait = (
  viewReplicas: number | undefined,
  lastConnected: number | undefined,
  waitMillis: number
): ReadonlyArray<string> | undefined => {
  if (viewReplicas === 0) return undefined
  // A client without a replica list: guess from the master's last ROLE, or send none the first time.
  const guess = viewReplicas ?? lastConnected
  if (guess === undefined) return undefined
  const wanted = Math.max(1, Math.min(guess, lastConnected ?? guess))
  const millis = Math.floor(Math.min(earlyWaitMillis, waitMillis))
  return millis < 1 ? undefined : ["WAIT", String(wanted), String(millis)]
}

/**
 * Waits until the replicas confirm every write made so far on `connection`, within `waitMillis`.
 *
 * Every replica that both the client's view (`viewReplicas`) and the master itself (its `role`
 * reply) list is waited for, and at least one: right after a failover the new master has fewer
 * replicas than the view remembers, and a master that lists none (restarted empty, isolated) must
 * not pass with `WAIT 0`. When neither knows a replica, the deployment has none and waiting could
 * only end in a timeout: `NO_REPLICAS`, at once, naming the way out.
 *
 * `viewReplicas` is undefined when the client keeps no replica list (a shared Sentinel client
 * without replica connections, a shared Cluster client without `useReplicas`): then every replica
 * the master lists is waited for, and a master that lists none is retried (it may be a freshly
 * promoted one whose replicas have not reconnected yet), since nothing says the deployment has none.
 */
export const awaitReplicas = (
  connection: { readonly address: string; readonly send: Send },
  viewReplicas: number | undefined,
  role: unknown,
  waitMillis: number,
  /** The reply of a `WAIT` sent right after the write, in the same round trip (see `earlyWait`). */
  earlyAcks?: unknown
): Effect.Effect<void, LockRedisError> =>
  Effect.suspend(() => {
    const connected = connectedReplicas(role)
    if (viewReplicas === 0 && connected === 0) return Effect.fail(noReplicas(connection.address))
    const wanted = Math.max(1, viewReplicas === undefined ? connected : Math.min(viewReplicas, connected))
    // WAIT answers how many replicas had the write when it returned: enough of them is enough,
    // whatever count it was asked for.
    if (typeof earlyAcks === "number" && earlyAcks >= wanted) return Effect.void
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
