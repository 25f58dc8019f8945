// The leader records of elections (`Backend.elections`) on each deployment: on standalone one script
// on the election's connection; on Sentinel and Cluster the same scripts through `guardedWrite`, so
// a record is written and read on the key's master, confirmed by `ROLE`, and a proclamation waits
// for the replicas when the election asks it to.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { ElectionScripts } from "@sage/lock"
import type { ElectionView, Elections } from "@sage/lock/LockBackend"
import type { LockRedisError } from "@sage/lock/LockError"
import { runScript, type Send } from "../connection/sending.ts"
import type { Pool } from "../pool/pool.ts"
import { replicatedFailure as failure, unexpected } from "../replies.ts"
import type { Known } from "../replicated/known.ts"
import { guardedWrite } from "../replicated/guardedWrite.ts"
import type { Topology } from "../replicated/topology.ts"
import * as Scripts from "../scripts.ts"

const viewOf = (reply: unknown): Result.Result<ElectionView, LockRedisError> => {
  const view = ElectionScripts.viewOf(reply)
  return view === undefined ? Result.fail(unexpected("electionRead", reply)) : Result.succeed(view)
}

/** Elections over one connection per election (standalone, Effect's `Redis`). */
export const standalone = (sendFor: (key: string) => Send): Elections => ({
  proclaim: (request) =>
    Effect.map(
      runScript(
        sendFor(request.key),
        Scripts.electionProclaim,
        ...Scripts.proclaimCall(request, "PUBLISH"),
        request.timeoutMillis
      ),
      (reply) => reply === 1
    ),
  read: (key, timeoutMillis) =>
    Effect.flatMap(
      runScript(sendFor(key), Scripts.electionRead, ...Scripts.electionReadCall(key), timeoutMillis),
      (reply) => Effect.fromResult(viewOf(reply))
    ),
  announce: (key, timeoutMillis) =>
    Effect.ignore(
      runScript(sendFor(key), Scripts.electionAnnounce, ...Scripts.announceCall(key, "PUBLISH"), timeoutMillis)
    )
})

const notMaster = (key: string) => (address: string) =>
  Effect.fail(failure("NOT_MASTER", `${address} is not the master for ${key}`, true))

/** Elections on a replicated topology (Sentinel, Cluster). */
export const replicated = (topology: Topology, pool: Pool, known: Known): Elections => {
  return {
    // A proclamation that wrote counts as a lease write: the role and the view are checked, and
    // the replicas waited for when asked.
    proclaim: (request) =>
      guardedWrite(
        topology,
        pool,
        known,
        {
          key: request.key,
          token: "",
          leaseMillis: 0,
          timeoutMillis: request.timeoutMillis,
          acknowledge: request.acknowledge
        },
        Scripts.electionProclaim,
        Scripts.proclaimCall(request, topology.publish),
        (reply) => Result.succeed([reply === 1, reply === 1 ? "wrote" : "no-write"] as const),
        notMaster(request.key)
      ),
    // A read counts as a write only so that the role and the view are checked (as a lease check is).
    read: (key, timeoutMillis) =>
      guardedWrite(
        topology,
        pool,
        known,
        { key, token: "", leaseMillis: 0, timeoutMillis, acknowledge: false },
        Scripts.electionRead,
        Scripts.electionReadCall(key),
        (reply) => Result.map(viewOf(reply), (view) => [view, "wrote"] as const),
        notMaster(key)
      ),
    announce: (key, timeoutMillis) =>
      Effect.ignore(
        guardedWrite(
          topology,
          pool,
          known,
          { key, token: "", leaseMillis: 0, timeoutMillis, acknowledge: false },
          Scripts.electionAnnounce,
          Scripts.announceCall(key, topology.publish),
          () => Result.succeed([undefined, "no-write"] as const),
          () => Effect.void
        )
      )
  }
}
