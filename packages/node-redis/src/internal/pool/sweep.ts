// Closing what the pool no longer uses: idle connections a burst left behind, and the shared ones of
// a node no operation goes to any more (a master a failover demoted, a node that left the Cluster).
// The check is a counter of sweeps, stamped on each connection when it is used, so the hot path reads
// no clock.
import * as Effect from "effect/Effect"
import { discard, type PoolState } from "./state.ts"

/**
 * Every half `idleCloseMillis`, close what was not used since the sweep before last: idle for a
 * whole `idleCloseMillis` at least. A shared connection unused that long has nothing in flight
 * (a stuck command would fail as the connection closes, and its caller retries); a node whose
 * permits are all back and which has nothing left open is forgotten.
 */
export const idleSweeps = (state: PoolState): Effect.Effect<never> => {
  const sweepMillis = Math.max(1, (state.options.idleCloseMillis ?? 60_000) / 2)
  return Effect.forever(Effect.andThen(Effect.sleep(sweepMillis), sweep(state)))
}

const sweep = (state: PoolState): Effect.Effect<void> =>
  Effect.sync(() => {
    const stale = state.sweeps - 2
    state.sweeps++
    for (const [address, pool] of state.nodes) {
      let kept = 0
      while (kept < pool.idle.length && pool.idle[kept]!.freedIn <= stale) kept++
      for (const { client } of pool.idle.splice(0, kept)) discard(state, client)
      if (pool.free === state.options.maxConnections && pool.waiters.length === 0 && pool.idle.length === 0) {
        state.nodes.delete(address)
      }
    }
    for (const [address, node] of state.lanes) {
      for (let i = 0; i < node.length; i++) {
        const lane = node[i]
        if (lane === undefined || lane.opening || lane.usedIn > stale) continue
        if (lane.client !== undefined) discard(state, lane.client)
        node[i] = undefined
      }
      if (node.every((lane) => lane === undefined)) state.lanes.delete(address)
    }
  })
