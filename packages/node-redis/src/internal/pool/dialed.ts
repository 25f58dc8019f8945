// The pool's connections as a backend outside this package dials them (`CommandCluster`,
// `CommandSentinel`): plain connections to one node, driven by the pool like its own.
import type { Classify } from "../connection/failures.ts"
import type { Dialer, PoolClient } from "./dialer.ts"

/**
 * A plain connection to one node that the backend's pool opened with `dial`. It must not reconnect
 * by itself, nor queue commands while disconnected, and must deliver commands in order.
 *
 * @category models
 * @since 0.2.1
 */
export interface DialedConnection {
  /** False once its socket closed (dropped, or destroyed). */
  readonly isOpen: boolean
  /** Connected, and not closed since. */
  readonly isReady: boolean
  readonly connect: () => Promise<unknown>
  /** Sends one command (name first, all text); resolves with the reply as `CommandBackend.Connection` says. */
  readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
  /** Closes it at once, whatever state it is in; commands still waiting fail. */
  readonly destroy: () => void
}

type Dialed = PoolClient & { readonly dialed: DialedConnection }

const poolClient = (connection: DialedConnection): Dialed => ({
  dialed: connection,
  get isOpen() {
    return connection.isOpen
  },
  get isReady() {
    return connection.isReady
  },
  connect: () => connection.connect(),
  sendCommand: (args) => connection.send(args)
})

/** A `Dialer` over `dial`, failures read by `classify`. */
export const dialedConnections = (
  dial: (node: { readonly host: string; readonly port: number }) => DialedConnection,
  classify: Classify
): Dialer => ({
  open: (node) => poolClient(dial(node)),
  // Every client this dialer opens is one of `poolClient`'s.
  destroy: (client) => (client as Dialed).dialed.destroy(),
  classify
})
