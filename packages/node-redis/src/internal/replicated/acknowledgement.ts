// Replica acknowledgement after an applied write (or a batch of them) on one dedicated connection:
// `WAIT` for the replicas, judged against what the client's view and the master itself (`ROLE`)
// list. Shared by single operations (guardedWrite.ts) and batched renewal (renewal.ts).
import * as Effect from "effect/Effect"
import { LockRedisError } from "@sage/lock/LockError"
import type { Send } from "../connection/sending.ts"
import { replicatedFailure as failure } from "../replies.ts"
import type { Route } from "./topology.ts"

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
 * How late a `WAIT` may answer after its own limit. The server handles a blocked client's timeout
 * when its event loop next wakes, and an idle server wakes on its `serverCron` timer (every 100 ms
 * at the default `hz 10`), so the reply can come up to 100 ms after the limit, and later on a busy
 * machine.
 */
const waitReplySlackMillis = 100

/**
 * How long a `WAIT` may block when the client waits `replyLimitMillis` for its reply: that limit
 * less the server's lateness (`waitReplySlackMillis`), less as much again (at most half of what is
 * left) for the reply's way back on a busy machine. A reply is never cut off while the server still
 * owes it; at or below zero, there is no time for a `WAIT`.
 */
const waitBlockMillis = (replyLimitMillis: number): number => {
  const room = Math.floor(replyLimitMillis) - waitReplySlackMillis
  return room - Math.min(waitReplySlackMillis, Math.floor(room / 2))
}

/** The replicas a `ROLE` reply lists as connected, as `ip:port`. */
export const replicaAddresses = (role: unknown): ReadonlyArray<string> =>
  Array.isArray(role) && Array.isArray(role[2])
    ? role[2].flatMap((entry: unknown) =>
        Array.isArray(entry) && entry.length >= 2 ? [`${String(entry[0])}:${String(entry[1])}`] : []
      )
    : []

/**
 * How many replicas must confirm a write, given the view's count and what the master lists as
 * connected (its `ROLE` reply): those both list, and at least one. Right after a failover the new
 * master has fewer replicas than the view remembers. Without a view, every replica the master lists.
 */
const wantedReplicas = (viewReplicas: number | undefined, connected: number): number =>
  Math.max(1, viewReplicas === undefined ? connected : Math.min(viewReplicas, connected))

/**
 * The `WAIT` to send in the same round trip as a write, before the master's `ROLE` reply is known:
 * for the replicas the view lists, or fewer when the master listed fewer last time (`lastConnected`);
 * without a view (a shared client that keeps no replica list), for those the master last listed.
 * It blocks at most 100 ms, and leaves the server time to answer within `waitMillis`
 * (`waitBlockMillis`): if it guessed wrong (the replica set changed) or the replicas are slow,
 * `awaitReplicas` asks again with the right count and the rest of the budget.
 */
export const earlyWait = (
  route: Route,
  lastConnected: number | undefined,
  waitMillis: number
): ReadonlyArray<string> | undefined => {
  if (route.replicas === 0) return undefined
  // A client without a replica list: guess from the master's last ROLE, or send none the first time.
  const guess = route.replicas ?? lastConnected
  if (guess === undefined) return undefined
  const wanted = wantedReplicas(guess, lastConnected ?? guess)
  const millis = Math.min(earlyWaitMillis, waitBlockMillis(waitMillis))
  return millis < 1 ? undefined : ["WAIT", String(wanted), String(millis)]
}

/**
 * Waits until the replicas confirm every write made so far on `connection`, within `waitMillis`.
 *
 * The replicas waited for are those both the view and the master list, and at least one: a master
 * that lists none (restarted empty, isolated) never passes with `WAIT 0`. A replica that left the
 * master while the view still vouches for it (`Route.departed`: it may have been promoted) fails
 * the write at once, whatever the others acknowledge. When neither the view nor the master lists a
 * healthy replica, a view that still knows some (reattaching after a failover, or down) makes the
 * write wait for them (a retryable `UNACKNOWLEDGED`); one that knows none means the deployment has
 * none, and waiting could only end in a timeout: `NO_REPLICAS`, at once, naming the way out.
 *
 * `route.replicas` is undefined when the client keeps no replica list (a shared Sentinel client
 * without replica connections, a shared Cluster client without `useReplicas`): then every replica
 * the master lists is waited for, and a master that lists none is retried (it may be a freshly
 * promoted one whose replicas have not reconnected yet), since nothing says the deployment has none.
 */
export const awaitReplicas = (
  connection: { readonly address: string; readonly send: Send },
  route: Route,
  role: unknown,
  waitMillis: number,
  /** The reply of a `WAIT` sent right after the write, in the same round trip (see `earlyWait`). */
  earlyAcks?: unknown
): Effect.Effect<void, LockRedisError> =>
  route.departed === undefined
    ? waitForReplicas(connection, route, role, waitMillis, earlyAcks)
    : Effect.flatMap(route.departed(connection.address, role), (replica) =>
        replica === undefined
          ? waitForReplicas(connection, route, role, waitMillis, earlyAcks)
          : Effect.fail(
              failure(
                "UNACKNOWLEDGED",
                `the replica ${replica} left ${connection.address} while the sentinels still vouch for it ` +
                  "(promoted?): the other replicas' acknowledgement does not count",
                true
              )
            )
      )

const waitForReplicas = (
  connection: { readonly address: string; readonly send: Send },
  route: Route,
  role: unknown,
  waitMillis: number,
  earlyAcks: unknown
): Effect.Effect<void, LockRedisError> =>
  Effect.suspend(() => {
    const connected = connectedReplicas(role)
    if (route.replicas === 0 && connected === 0) {
      // The view knows replicas, none healthy: after a failover they reattach to the new master
      // within seconds. Waiting for them is retried; only a deployment with none at all is an error.
      if (route.knownReplicas !== undefined && route.knownReplicas > 0) {
        return Effect.fail(
          failure(
            "UNACKNOWLEDGED",
            `no replica of ${connection.address} is connected yet (the view knows ${route.knownReplicas}, none healthy)`,
            true
          )
        )
      }
      return Effect.fail(noReplicas(connection.address))
    }
    const wanted = wantedReplicas(route.replicas, connected)
    // WAIT answers how many replicas had the write when it returned: enough of them is enough,
    // whatever count it was asked for.
    if (typeof earlyAcks === "number" && earlyAcks >= wanted) return Effect.void
    const millis = Math.floor(waitMillis)
    if (millis < 1) return Effect.fail(failure("UNACKNOWLEDGED", "no time left to wait for replicas", true))
    // The client waits for the reply up to the server's lateness past the time left.
    const blockMillis = waitBlockMillis(millis + waitReplySlackMillis)
    return Effect.flatMap(
      connection.send(["WAIT", String(wanted), String(blockMillis)], millis + waitReplySlackMillis),
      (acks) =>
        typeof acks === "number" && acks >= wanted
          ? Effect.void
          : Effect.fail(
              failure(
                "UNACKNOWLEDGED",
                `${String(acks)} of ${wanted} replica(s) acknowledged within ${blockMillis} ms`,
                true
              )
            )
    )
  })
