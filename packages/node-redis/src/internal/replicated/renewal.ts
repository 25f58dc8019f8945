// Batched renewal on replicated deployments (Sentinel, Cluster): one dedicated connection per master
// per batch, carrying every renewal for that master as one pipeline, then one `ROLE` and (with
// acknowledgement) one `WAIT` for all of them. `WAIT` counts the writes made on its connection, so
// one `WAIT` after the pipeline covers every renewal in it.
//
// The checks are those of a single renewal (`guardedWrite.ts`): a renewal only counts when the node
// still calls itself master, the client's view agrees, and the replicas confirmed it. A renewal that
// meets a redirect (`MOVED`, `ASK`: a slot migrating) is retried on its own through the single-key
// path, which follows `ASK`.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { LeaseRequest, RenewReply } from "@sage/lock/LockBackend"
import type { LockRedisError } from "@sage/lock/LockError"
import { monotonicMillis } from "../connection/time.ts"
import type { Pool } from "../pool/pool.ts"
import { replicatedFailure as failure } from "../replies.ts"
import * as Scripts from "../scripts.ts"
import { awaitReplicas } from "./acknowledgement.ts"
import { suggestsStaleView } from "./staleView.ts"
import type * as StrayWrites from "./strayWrites.ts"
import type { Route, Topology } from "./topology.ts"

interface Group {
  readonly route: Route
  readonly indexes: Array<number>
}

/** Renews `requests` (sharing one timeout and acknowledgement) with one round trip per master. */
export const renewAll = (
  topology: Topology,
  pool: Pool,
  requests: ReadonlyArray<LeaseRequest>,
  renewOne: (request: LeaseRequest) => Effect.Effect<boolean, LockRedisError>,
  strays: StrayWrites.StrayWrites
): Effect.Effect<ReadonlyArray<RenewReply>> =>
  Effect.gen(function* () {
    const replies: Array<RenewReply> = Array.from({ length: requests.length }, () => false)
    const groups = new Map<string, Group>()
    for (let i = 0; i < requests.length; i++) {
      const routed = topology.route(requests[i]!.key)
      if (routed._tag === "Failure") {
        replies[i] = routed.failure
        continue
      }
      const group = groups.get(routed.success.address)
      if (group === undefined) groups.set(routed.success.address, { route: routed.success, indexes: [i] })
      else group.indexes.push(i)
    }
    const first = requests[0]
    if (first === undefined) return replies
    const start = yield* monotonicMillis
    const budget = first.timeoutMillis - Math.max(10, first.timeoutMillis * 0.2)
    yield* Effect.forEach(
      groups.values(),
      (group) =>
        renewOnNode(topology, pool, group, requests, budget, strays).pipe(
          Effect.match({
            onFailure: (error) => {
              for (const i of group.indexes) replies[i] = error
            },
            onSuccess: (results) => {
              group.indexes.forEach((i, n) => (replies[i] = results[n]!))
            }
          })
        ),
      { concurrency: "unbounded", discard: true }
    )
    yield* refreshAfterFailures(topology, requests, replies)
    // Redirected renewals go through the single-key path, which follows ASK and MOVED, within what is
    // left of their time: the batch already used some of it.
    const redirected = replies.flatMap((reply, i) =>
      typeof reply !== "boolean" && (reply.code === "ASK" || reply.code === "MOVED") ? [i] : []
    )
    if (redirected.length === 0) return replies
    // A slot that moved: the view is re-read once for all of them first (within half of what is
    // left), so their single-key calls go straight to the new owner.
    const moved = redirected.find((i) => {
      const reply = replies[i]!
      return typeof reply !== "boolean" && reply.code === "MOVED"
    })
    if (moved !== undefined && topology.reread !== undefined) {
      const left = first.timeoutMillis - ((yield* monotonicMillis) - start)
      yield* topology.reread(requests[moved]!.key, left / 2)
    }
    const spent = (yield* monotonicMillis) - start
    yield* Effect.forEach(
      redirected,
      (i) =>
        Effect.match(renewOne({ ...requests[i]!, timeoutMillis: requests[i]!.timeoutMillis - spent }), {
          onFailure: (error) => (replies[i] = error),
          onSuccess: (ok) => (replies[i] = ok)
        }),
      { concurrency: "unbounded", discard: true }
    )
    return replies
  })

/**
 * Asks for the view to be re-read once per node whose renewals failed in a way that suggests it is
 * stale (the node unreachable, `READONLY`, `CLUSTERDOWN`...), as a single renewal does: a process
 * that only renews must not keep renewing against a dead master until its leases run out.
 * Redirects are left to the single-key retries, and `NOT_MASTER` has refreshed already.
 */
const refreshAfterFailures = (
  topology: Topology,
  requests: ReadonlyArray<LeaseRequest>,
  replies: ReadonlyArray<RenewReply>
): Effect.Effect<void> => {
  const keys = new Map<string, string>()
  replies.forEach((reply, i) => {
    if (typeof reply === "boolean" || !suggestsStaleView(reply)) return
    if (reply.code === "ASK" || reply.code === "MOVED" || reply.code === "NOT_MASTER") return
    const key = requests[i]!.key
    const routed = topology.route(key)
    const node = Result.isSuccess(routed) ? routed.success.address : ""
    if (!keys.has(node)) keys.set(node, key)
  })
  return Effect.forEach(keys.values(), topology.refresh, { discard: true })
}

const renewOnNode = (
  topology: Topology,
  pool: Pool,
  group: Group,
  requests: ReadonlyArray<LeaseRequest>,
  budget: number,
  strays: StrayWrites.StrayWrites
): Effect.Effect<ReadonlyArray<RenewReply>, LockRedisError> =>
  Effect.gen(function* () {
    const start = yield* monotonicMillis
    const left = Effect.map(monotonicMillis, (now) => budget - (now - start))
    const acknowledge = requests[group.indexes[0]!]!.acknowledge
    const renewCall = (kind: "EVALSHA" | "EVAL", i: number) => {
      return Scripts.evalArgs(kind, Scripts.renewScript(requests[i]!), ...Scripts.renewCall(requests[i]!))
    }
    return yield* pool.use(group.route.address, budget, (connection) =>
      Effect.gen(function* () {
        // One batch on one connection (one write, one timer): node-redis pipelines it.
        const outcomes = yield* connection.sendAll(
          group.indexes.map((i) => renewCall("EVALSHA", i)),
          yield* left
        )
        // A node without the script cached (restarted, or a fresh replica promoted) answers NOSCRIPT:
        // those are sent again with the script's source, within what is left.
        const reload = outcomes.flatMap((outcome, n) =>
          Result.isFailure(outcome) && outcome.failure.code === "NOSCRIPT" ? [n] : []
        )
        if (reload.length > 0) {
          const again = yield* connection.sendAll(
            reload.map((n) => renewCall("EVAL", group.indexes[n]!)),
            yield* left
          )
          reload.forEach((n, k) => (outcomes[n] = again[k]!))
        }
        const results: Array<RenewReply> = outcomes.map((outcome) =>
          Result.isFailure(outcome) ? outcome.failure : outcome.success === 1
        )
        if (!results.some((reply) => reply === true)) return results
        const wrote = (replace: LockRedisError) => results.map((reply) => (reply === true ? replace : reply))
        const role = yield* connection.send(["ROLE"], yield* left)
        const isMaster = Array.isArray(role) && role[0] === "master"
        // The view must agree for the keys that were renewed here (one that answered MOVED, say, no
        // longer belongs to this node, and says nothing about the others).
        const disowned = group.indexes.some(
          (i, n) => results[n] === true && !topology.isMaster(requests[i]!.key, connection.address)
        )
        if (!isMaster || disowned) {
          yield* topology.refresh(requests[group.indexes[0]!]!.key)
          // What it extended there is released there too (as a single renewal's stray write is).
          group.indexes.forEach((i, n) => {
            if (results[n] === true) strays.remember(requests[i]!.key, requests[i]!.token, connection.address)
          })
          return wrote(failure("NOT_MASTER", `${connection.address} is not the master for these keys`, true))
        }
        if (!acknowledge) return results
        // One WAIT covers every write of the pipeline: it counts all writes made on its connection.
        const acknowledged = yield* Effect.result(awaitReplicas(connection, group.route, role, yield* left))
        return acknowledged._tag === "Success" ? results : wrote(acknowledged.failure)
      })
    )
  })
