// A node's permits: at most `maxConnections` callers hold a dedicated connection to it at once, the
// others wait in arrival order, within their own timeout.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import { LockRedisError } from "@sage/lock/LockError"
import type { NodePool, Ticket } from "./state.ts"

export const grant = (pool: NodePool, ticket: Ticket): boolean => {
  if (pool.free === 0) return false
  pool.free--
  ticket.granted = true
  return true
}

export const giveBack = (pool: NodePool): void => {
  const next = pool.waiters.shift()
  if (next === undefined) {
    pool.free++
    return
  }
  next.granted = true
  Deferred.doneUnsafe(next.ready!, Effect.void)
}

/** No connection to `address` within `timeoutMillis`: the permit never came (or, for a batch, it never went out). */
export const exhausted = (address: string, timeoutMillis: number): LockRedisError =>
  new LockRedisError({
    command: "dedicated connection",
    kind: "timeout",
    code: "POOL_EXHAUSTED",
    reply: `no dedicated connection to ${address} became free within ${Math.round(timeoutMillis)} ms`,
    retryable: true,
    mayHaveExecuted: false
  })
