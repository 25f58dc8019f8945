// Lock operations on replicated deployments (Sentinel, Cluster), shared by both topologies.
//
// Each acquire or renew runs on one dedicated connection to the key's master: the script and, in
// the same round trip, `ROLE` (the node must still call itself master, and the client's own view of
// the topology must agree: a demoted or restarted old master can answer "master" for seconds) and,
// with replica acknowledgement on, a `WAIT` for the replicas the view lists (fewer if the master
// listed fewer last time), bounded to 100 ms. When the `ROLE` reply shows that this early `WAIT`
// asked for too few replicas, or it ran out, a second `WAIT` asks for the right count with what is
// left of the caller's budget (never 0, which would block forever). `WAIT` counts only writes made
// on the same connection. A missing acknowledgement is a retryable failure; a write on a node that
// is not the master is reported as such. On Sentinel, acknowledged acquisitions that come together
// share one such round trip: their scripts, one `ROLE` and one `WAIT` (groupCommit/).
//
// The steps of one operation are guardedWrite.ts; the replicas' acknowledgement is
// acknowledgement.ts; batched renewal is renewal.ts.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { Backend, LeaseRequest, Wakeups } from "@sage/lock/LockBackend"
import type * as Scope from "effect/Scope"
import { runScript } from "../connection/sending.ts"
import type { Pool } from "../pool/pool.ts"
import { readAcquire, releasedReply, replicatedFailure as failure } from "../replies.ts"
import * as Elections from "../election/elections.ts"
import * as Scripts from "../scripts.ts"
import { make as makeWakeups } from "../wakeups/wakeups.ts"
import * as GroupCommit from "./groupCommit/groupCommit.ts"
import { guardedWrite } from "./guardedWrite.ts"
import { busyKeys, type Known } from "./known.ts"
import { renewAll } from "./renewal.ts"
import * as StrayWrites from "./strayWrites.ts"
import type { Topology } from "./topology.ts"

/**
 * Compare-and-delete on nodes outside the current view, best effort within `timeoutMillis` in all.
 * Each step has its own bound (the pool's connect, the script, a NOSCRIPT re-send), and a restarted
 * node can use most of each, so the whole is bounded once more: one after the other they could take
 * three times the budget, and the caller's cleanup promises one second.
 */
const releaseStrays = (
  topology: Topology,
  pool: Pool,
  addresses: ReadonlyArray<string>,
  request: LeaseRequest
): Effect.Effect<void> =>
  Effect.forEach(
    addresses,
    (address) =>
      pool.use(address, request.timeoutMillis, (connection) =>
        runScript(
          connection.send,
          Scripts.releaseScript(request),
          ...Scripts.releaseCall(request, topology.publish),
          request.timeoutMillis
        )
      ),
    { concurrency: "unbounded", discard: true }
  ).pipe(Effect.timeoutOption(Math.max(1, request.timeoutMillis)), Effect.ignore)

/**
 * The lock backend over a replicated topology and its dedicated pool, with wake-ups over the
 * topology's subscriber. `strays` records writes that landed outside the view, for the release that
 * follows (see strayWrites.ts).
 */
export const makeBackend = (
  topology: Topology,
  pool: Pool,
  strays = StrayWrites.make(),
  options: {
    readonly sharedSubscriber?: boolean | undefined
    /** Commit acknowledged acquisitions to a master as groups (groupCommit/). */
    readonly groupCommit?: boolean | undefined
  } = {}
): Effect.Effect<Backend, never, Scope.Scope> => {
  const grouping: Effect.Effect<GroupCommit.GroupCommit | undefined, never, Scope.Scope> =
    options.groupCommit === true ? GroupCommit.make(pool) : Effect.succeed(undefined)
  return Effect.flatMap(grouping, (groups) => {
    const known: Known = { replicaCounts: new Map<string, number>(), busy: busyKeys(), groups }
    const leave: Wakeups["leave"] = (key, waiterId, timeoutMillis, permits) =>
      Effect.ignore(
        guardedWrite(
          topology,
          pool,
          known,
          { key, token: "", leaseMillis: 0, timeoutMillis, acknowledge: false, permits },
          Scripts.leaveScript(permits),
          Scripts.leaveCall(key, waiterId, topology.publish, permits),
          () => Result.succeed([undefined, "no-write"] as const),
          () => Effect.void
        )
      )
    // Without a subscriber, waiters poll and withdraw through the backend's own `leave`.
    if (topology.subscriber === undefined) {
      return Effect.succeed({ ...backendOver(topology, pool, known, strays, undefined), leave })
    }
    return Effect.map(
      makeWakeups({
        subscriber: topology.subscriber,
        classify: pool.classify,
        // On a client the application keeps, the lock's channels are dropped when its layer closes.
        unsubscribeOnClose: options.sharedSubscriber,
        leave
      }),
      (wakeups) => backendOver(topology, pool, known, strays, wakeups)
    )
  })
}

const backendOver = (
  topology: Topology,
  pool: Pool,
  known: Known,
  strays: StrayWrites.StrayWrites,
  wakeups: Wakeups | undefined
): Backend => {
  const backend: Backend = {
    description: topology.description,
    acquire: (request) =>
      guardedWrite(
        topology,
        pool,
        known,
        request,
        Scripts.acquireScript(request),
        Scripts.acquireCall(request, topology.publish),
        (reply) =>
          Result.map(
            readAcquire(reply),
            (parsed) => [parsed, parsed._tag === "Acquired" ? "wrote" : "no-write"] as const
          ),
        (address) =>
          Effect.sync(() => {
            strays.remember(request.key, request.token, address)
            return { _tag: "NotMaster", address } as const
          })
      ),
    renew: (request) =>
      guardedWrite(
        topology,
        pool,
        known,
        request,
        Scripts.renewScript(request),
        Scripts.renewCall(request),
        (reply) => Result.succeed([reply === 1, reply === 1 ? "wrote" : "no-write"] as const),
        (address) =>
          Effect.suspend(() => {
            strays.remember(request.key, request.token, address)
            return Effect.fail(failure("NOT_MASTER", `${address} is not the master for ${request.key}`, true))
          })
      ),
    release: (request) =>
      Effect.suspend(() => {
        const onMaster = guardedWrite(
          topology,
          pool,
          known,
          { ...request, acknowledge: false },
          Scripts.releaseScript(request),
          Scripts.releaseCall(request, topology.publish),
          (reply) => Result.succeed([releasedReply(reply), "no-write"] as const),
          () => Effect.succeed(false)
        )
        // A node that took this token's write outside the view is cleaned too; only the master's reply counts.
        const elsewhere = strays.take(request.key, request.token)
        if (elsewhere.length === 0) return onMaster
        return Effect.all([Effect.result(onMaster), releaseStrays(topology, pool, elsewhere, request)], {
          concurrency: "unbounded"
        }).pipe(Effect.flatMap(([result]) => Effect.fromResult(result)))
      }),
    // "Held" counts as a write here only so that the role and the client's view are checked (with no
    // WAIT): a demoted master may still hold the key while the new one has lost it.
    check: (request) =>
      guardedWrite(
        topology,
        pool,
        known,
        { ...request, acknowledge: false },
        Scripts.checkScript(request),
        Scripts.checkCall(request),
        (reply) => {
          const held = typeof reply === "number" && reply !== -2
          return Result.succeed([held, held ? "wrote" : "no-write"] as const)
        },
        (address) => Effect.fail(failure("NOT_MASTER", `${address} is not the master for ${request.key}`, false))
      ),
    renewAll: (requests) => renewAll(topology, pool, requests, (request) => backend.renew(request), strays),
    elections: Elections.replicated(topology, pool, known),
    ...(wakeups === undefined ? {} : { wakeups })
  }
  return backend
}
