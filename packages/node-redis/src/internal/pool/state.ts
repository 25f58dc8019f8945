// What the dedicated pool keeps: its settings, each node's permits and idle connections, each node's
// shared connections (lanes), every connection it opened, and whether it closed. Closing the pool
// (with its scope) destroys every connection it opened, and it opens none afterwards.
import type * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Address from "../connection/address.ts"
import type { Connection } from "./connection.ts"
import type { Dialer, PoolClient } from "./dialer.ts"

export type Client = PoolClient

/** The pool's settings (`make`'s options). */
export interface Options {
  readonly maxConnections: number
  /** Opens the connections (node-redis's: `nodeRedisDialer`). */
  readonly dialer: Dialer
  /**
   * Where to connect for a node the topology names (e.g. a Cluster's `nodeAddressMap`: nodes behind
   * NAT or a proxy announce addresses the client cannot reach); undefined keeps the named address.
   */
  readonly resolve?: ((address: string) => Address.HostPort | undefined) | undefined
  /**
   * How many shared connections each node gets (default 1). One server taking every lock operation
   * (a Sentinel master) gets two, as the standalone layer has: on one connection the client and the
   * server take turns (see `connection/lane.ts`). A Cluster client keeps one per master: there the
   * client already works on one master's replies while another runs its commands, and more
   * connections only add client CPU.
   */
  readonly sharedLanes?: number | undefined
  /**
   * Connections unused for this long (default a minute) are closed, within half as long again:
   * idle pooled ones and shared ones alike. Tests shorten it.
   */
  readonly idleCloseMillis?: number | undefined
}

/**
 * A caller of `use`; `granted` is set in the same step that hands it a permit. `ready` exists only
 * while it waits for one (a caller that finds a permit free never waits).
 */
export interface Ticket {
  granted: boolean
  ready: Deferred.Deferred<void> | undefined
}

/**
 * One node's permits. Waiters are served in arrival order. Ownership of a permit is recorded
 * synchronously on the ticket, so a waiter interrupted or timed out at any instant either still
 * sits in `waiters` (nothing to give back) or was granted (its finalizer gives the permit back).
 */
export interface NodePool {
  free: number
  readonly waiters: Array<Ticket>
  /** Free connections, the most recently used last; each with the sweep during which it was freed. */
  readonly idle: Array<IdleClient>
}

export interface IdleClient {
  readonly client: Client
  readonly freedIn: number
}

/** One shared connection of a node: opening (no client, or one still connecting) or opened. */
export interface Lane {
  opening: boolean
  client: Client | undefined
  connection: Connection | undefined
  /** The sweep during which it was last used. */
  usedIn: number
}

export interface PoolState {
  readonly options: Options
  readonly nodes: Map<string, NodePool>
  /** Every connection the pool opened and has not discarded yet. */
  readonly open: Set<Client>
  readonly dialer: Dialer
  /** Idle sweeps so far: what a connection's last use is stamped with. */
  sweeps: number
  /**
   * Once closed, no connection may be opened: a release or renewal still in flight while the layer
   * closes would otherwise open one that nothing ever closes, and the process could not exit.
   */
  closed: boolean
  readonly isClosed: () => boolean
  /**
   * A pooled connection's `Connection`, made once. A command on it that got no reply in time (an
   * outcome of `sendAll`, which succeeds whatever each command did) marks it (`unanswered`): it may
   * still carry a late reply or a blocked command, so it is closed after its use instead of going
   * back idle.
   */
  readonly pooled: WeakMap<Client, Connection>
  readonly unanswered: WeakSet<Client>
  /**
   * Each node's shared connections. Each lane keeps its `Connection`: every release passes there,
   * and needs no new one per call.
   */
  readonly lanes: Map<string, Array<Lane | undefined>>
}

/** The pool's state, every connection it opened destroyed when the scope closes. */
export const makeState = (options: Options): Effect.Effect<PoolState, never, Scope.Scope> =>
  Effect.gen(function* () {
    const state: PoolState = {
      options,
      nodes: new Map(),
      open: new Set(),
      dialer: options.dialer,
      sweeps: 0,
      closed: false,
      isClosed: () => state.closed,
      pooled: new WeakMap(),
      unanswered: new WeakSet(),
      lanes: new Map()
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        state.closed = true
        for (const client of state.open) state.dialer.destroy(client)
        state.open.clear()
      })
    )
    return state
  })

export const nodePool = (state: PoolState, address: string): NodePool => {
  let pool = state.nodes.get(address)
  if (pool === undefined) {
    pool = { free: state.options.maxConnections, waiters: [], idle: [] }
    state.nodes.set(address, pool)
  }
  return pool
}

export const discard = (state: PoolState, client: Client): void => {
  state.open.delete(client)
  state.dialer.destroy(client)
}
