// The pool's connections to one node: opened within the caller's budget, never reconnected (a broken
// one is dropped and replaced), and used through a `Connection` made once per client.
import * as Effect from "effect/Effect"
import { LockRedisError } from "@sage/lock/LockError"
import * as Address from "../connection/address.ts"
import { type Connection, toConnection } from "./connection.ts"
import { type Client, discard, type PoolState } from "./state.ts"

/**
 * Opens a connection to `address` within `timeoutMillis`; `created` sees the client as soon as it
 * exists. Fails with `CLOSED` once the pool has closed.
 */
export const connect = (
  state: PoolState,
  address: string,
  timeoutMillis: number,
  created?: (client: Client) => void
): Effect.Effect<Client, LockRedisError> =>
  Effect.suspend(() => {
    if (state.closed) {
      return Effect.fail(
        new LockRedisError({
          command: `connect ${address}`,
          kind: "connection",
          code: "CLOSED",
          reply: "the lock backend is closed",
          retryable: false,
          mayHaveExecuted: false
        })
      )
    }
    const { dialer, options } = state
    const client: Client = dialer.open(options.resolve?.(address) ?? Address.fromNodeName(address))
    state.open.add(client)
    created?.(client)
    return Effect.tryPromise({
      try: () => client.connect(),
      catch: (error) => dialer.classify(`connect ${address}`, error)
    }).pipe(
      Effect.timeoutOrElse({
        duration: Math.max(1, timeoutMillis),
        orElse: () =>
          Effect.fail(
            new LockRedisError({
              command: `connect ${address}`,
              kind: "timeout",
              code: "CONNECT_TIMEOUT",
              reply: `no connection to ${address} within ${Math.round(timeoutMillis)} ms`,
              retryable: true,
              mayHaveExecuted: false
            })
          )
      }),
      Effect.as(client),
      // Closed while connecting: this one is not in the set the finalizer emptied.
      Effect.tap(() => (state.closed ? Effect.sync(() => discard(state, client)) : Effect.void)),
      Effect.onError(() => Effect.sync(() => discard(state, client)))
    )
  })

/** The `Connection` of a pooled client (see `PoolState.pooled`), made on its first use. */
export const pooledConnection = (state: PoolState, address: string, client: Client): Connection => {
  let connection = state.pooled.get(client)
  if (connection === undefined) {
    connection = toConnection(
      address,
      client,
      () => state.unanswered.add(client),
      state.isClosed,
      state.dialer.classify
    )
    state.pooled.set(client, connection)
  }
  return connection
}
