// A node's shared connections (`Pool.shared`): pipelined, never held by one caller, a lock key always
// on the same one, and opened in the background so that no caller waits for their connect.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { LockRedisError } from "@sage/lock/LockError"
import { laneOf } from "../connection/lane.ts"
import { silenceProbe } from "../connection/silenceProbe.ts"
import { connect } from "./clients.ts"
import { type Connection, toConnection } from "./connection.ts"
import type { Use } from "./dedicated.ts"
import { discard, type Lane, type PoolState } from "./state.ts"

/** `Pool.shared`: runs `f` on one of the node's shared connections, `key` picking which. */
export type Shared = <A>(
  address: string,
  key: string,
  timeoutMillis: number,
  f: (connection: Connection) => Effect.Effect<A, LockRedisError>
) => Effect.Effect<A, LockRedisError>

const laneConnectMillis = 5_000

/**
 * `Pool.shared` over the pool's state; `use` serves the callers whose lane is not ready.
 *
 * The shared connections of each node (`sharedLanes`), opened together in the background the first
 * time one is wanted, so no release ever waits for a connect: until a lane is ready (and after it
 * broke, until the next one is), its callers take a pooled connection, which an acquisition on that
 * node has usually left idle. A lane is marked as opening from the moment it is wanted until its
 * connect ends, so that only one is opened at a time per lane.
 */
export const sharedLanes = (state: PoolState, use: Use): Effect.Effect<Shared, never, Scope.Scope> =>
  Effect.gen(function* () {
    const lanesPerNode = Math.max(1, Math.floor(state.options.sharedLanes ?? 1))
    const scope = yield* Effect.scope
    const context = yield* Effect.context<never>()
    const log = (effect: Effect.Effect<void>) => Effect.runForkWith(context)(effect)
    const shared: Shared = (address, key, timeoutMillis, f) =>
      Effect.suspend(() => {
        let node = state.lanes.get(address)
        if (node === undefined) {
          node = Array.from({ length: lanesPerNode }, () => undefined)
          state.lanes.set(address, node)
        }
        const lane = node[laneOf(key, lanesPerNode)]
        if (lane?.connection !== undefined && lane.client?.isReady === true) {
          lane.usedIn = state.sweeps
          return f(lane.connection)
        }
        if (lane?.opening === true || state.closed) return use(address, timeoutMillis, f)
        return Effect.andThen(
          // Each on its own: one that fails leaves the others connecting.
          Effect.forkIn(
            Effect.all(openLanes(state, address, node, log), { concurrency: "unbounded", discard: true }),
            scope
          ),
          use(address, timeoutMillis, f)
        )
      })
    return shared
  })

/**
 * None yet, or broken (the lock's own connections never reconnect): opens every lane of the node
 * that is missing or broken, together. Each is marked as opening here, before the background fiber
 * runs, so that the callers that come meanwhile use the pool instead of opening it again.
 */
const openLanes = (
  state: PoolState,
  address: string,
  node: Array<Lane | undefined>,
  log: (effect: Effect.Effect<void>) => void
): Array<Effect.Effect<void>> => {
  const opening: Array<Effect.Effect<void>> = []
  for (let i = 0; i < node.length; i++) {
    const other = node[i]
    if (other !== undefined && (other.opening || other.client?.isReady === true)) continue
    if (other?.client !== undefined) discard(state, other.client)
    const fresh: Lane = { opening: true, client: undefined, connection: undefined, usedIn: state.sweeps }
    node[i] = fresh
    opening.push(
      connect(state, address, laneConnectMillis, (client) => {
        fresh.client = client
        // Gone silent while ready (see connection/silentConnection.ts): destroyed, so that the next caller
        // opens the lane again, as after any break.
        const onNoReply = silenceProbe(
          () => (fresh.client === client && !state.closed ? client : undefined),
          (_, silentFor) => {
            discard(state, client)
            log(
              Effect.logWarning(
                `redis connection to ${address} answered nothing for ${silentFor} ms while reported ready; closed, a new one opens on next use`
              )
            )
          }
        )
        fresh.connection = toConnection(address, client, onNoReply, state.isClosed, state.dialer.classify)
      }).pipe(
        Effect.ignore,
        Effect.ensuring(
          Effect.sync(() => {
            fresh.opening = false
          })
        )
      )
    )
  }
  return opening
}
