// The dedicated connection pool: connections that one lock operation holds for several commands
// (the write, then ROLE, then WAIT, which counts only that connection's writes and blocks it).
//
// One pool per node address, each bounded by `maxConnections`. Waiting for a free connection is
// bounded by the caller's own timeout, so a full pool delays acquisition (within waitTimeout) and
// renewal (within the usable lease) but never stretches them. A connection whose command failed,
// timed out or was interrupted is destroyed rather than reused: its socket may still carry a late
// reply or a blocked WAIT.
//
// Connections nobody used for about a minute are closed (`idleCloseMillis`, sweep.ts): the idle
// ones a burst left in a node's pool, and the shared ones of a node no operation goes to any more.
//
// The steps: the pool's state and its close (state.ts), opening a node's connections (clients.ts),
// dedicated connections and their permits (dedicated.ts, permits.ts), the shared lanes
// (sharedLanes.ts), and the idle sweep (sweep.ts).
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Classify } from "../connection/failures.ts"
import { dedicated, type Use } from "./dedicated.ts"
import { type Shared, sharedLanes } from "./sharedLanes.ts"
import { makeState, type Options } from "./state.ts"
import { idleSweeps } from "./sweep.ts"

export interface Pool {
  /**
   * Runs `f` on a dedicated connection to `address`, waiting at most `timeoutMillis` for one. `f` is
   * called once the connection is held, so budgets it reads when called are already net of the wait.
   */
  readonly use: Use
  /**
   * Runs `f` on one of the node's shared connections (`sharedLanes` per node, pipelined, never held
   * by one caller), `key` picking which (`laneOf`, so one lock always uses the same one). Only for
   * operations that need no command of their own around the script: no `WAIT` (it counts the writes
   * of its connection and blocks it), no `ASKING` right before. (`ROLE` may follow on it: other
   * callers' commands in between do not change which node answers.) A failure or timeout does not
   * close it (node-redis keeps replies in order); the node's shared connections are opened in the
   * background on first use, and again after one broke, and until they are ready callers use a
   * dedicated connection (`use`) instead of waiting for them.
   */
  readonly shared: Shared
  /** Connections currently open, per address (for tests and metrics). */
  readonly openConnections: () => number
  /**
   * How failures of the client library the pool's dialer uses read; a backend's other connections
   * (its topology's, its subscriber) are of the same library.
   */
  readonly classify: Classify
}

/** A pool bounded per node, its connections opened by `options.dialer`. */
export const make = (options: Options): Effect.Effect<Pool, never, Scope.Scope> =>
  Effect.gen(function* () {
    const state = yield* makeState(options)
    const use = dedicated(state)
    const shared = yield* sharedLanes(state, use)
    yield* Effect.forkScoped(idleSweeps(state))
    return { use, shared, openConnections: () => state.open.size, classify: options.dialer.classify } satisfies Pool
  })
