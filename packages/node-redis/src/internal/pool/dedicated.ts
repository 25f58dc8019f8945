// A dedicated connection for one caller at a time (`Pool.use`): a permit of the node, then an idle
// connection or a new one, given back (or destroyed) when the caller is done.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { LockRedisError } from "@sage/lock/LockError"
import { monotonicMillis } from "../connection/time.ts"
import { connect, pooledConnection } from "./clients.ts"
import type { Connection } from "./connection.ts"
import { exhausted, giveBack, grant } from "./permits.ts"
import { type Client, discard, type NodePool, nodePool, type PoolState, type Ticket } from "./state.ts"

/** `Pool.use`: runs `f` on a dedicated connection to `address`, waiting at most `timeoutMillis` for one. */
export type Use = <A>(
  address: string,
  timeoutMillis: number,
  f: (connection: Connection) => Effect.Effect<A, LockRedisError>
) => Effect.Effect<A, LockRedisError>

/**
 * `Pool.use` over the pool's state.
 *
 * Nothing here is uninterruptible: an interrupted caller leaves at once, whether it waits for a
 * permit, connects or runs `f`. One finalizer, installed before the permit is taken, settles
 * everything: the connection `f` ran on goes back to the idle list (or is destroyed, if `f` failed
 * or was interrupted: its socket may still carry a late reply or a blocked WAIT), then the permit
 * goes back (or the waiting ticket leaves the line). Written as plain continuations, with no
 * clock read or Deferred when a permit and an idle connection are free: every replicated
 * operation passes here.
 */
export const dedicated =
  (state: PoolState): Use =>
  (address, timeoutMillis, f) =>
    Effect.suspend(() => {
      // Looked up in the step that takes the permit: the idle sweep forgets a node whose permits are
      // all free, and the fiber may yield between two steps.
      let pool: NodePool | undefined
      const ticket: Ticket = { granted: false, ready: undefined }
      let held: Client | undefined
      const runOn = (client: Client) => {
        held = client
        return f(pooledConnection(state, address, client))
      }
      const withPermit = (pool: NodePool, remainingMillis: number) => {
        let client = pool.idle.pop()?.client
        while (client !== undefined && !client.isReady) {
          discard(state, client)
          client = pool.idle.pop()?.client
        }
        return client !== undefined ? runOn(client) : Effect.flatMap(connect(state, address, remainingMillis), runOn)
      }
      // Connecting shares the caller's budget with the wait for the permit.
      const waitForPermit = (pool: NodePool) =>
        Effect.flatMap(monotonicMillis, (start) => {
          const ready = Deferred.makeUnsafe<void>()
          ticket.ready = ready
          pool.waiters.push(ticket)
          return Effect.flatMap(Effect.timeoutOption(Deferred.await(ready), Math.max(1, timeoutMillis)), (granted) =>
            granted._tag === "Some"
              ? Effect.flatMap(monotonicMillis, (now) => withPermit(pool, timeoutMillis - (now - start)))
              : Effect.fail(exhausted(address, timeoutMillis))
          )
        })
      return Effect.onExit(
        Effect.suspend(() => {
          pool = nodePool(state, address)
          return grant(pool, ticket) ? withPermit(pool, timeoutMillis) : waitForPermit(pool)
        }),
        (exit) =>
          Effect.sync(() => {
            // Interrupted before it started: nothing taken.
            if (pool === undefined) return
            if (held !== undefined) {
              if (Exit.isSuccess(exit) && held.isReady && !state.closed && !state.unanswered.has(held)) {
                pool.idle.push({ client: held, freedIn: state.sweeps })
              } else discard(state, held)
            }
            if (ticket.granted) return giveBack(pool)
            const at = pool.waiters.indexOf(ticket)
            if (at !== -1) pool.waiters.splice(at, 1)
          })
      )
    })
