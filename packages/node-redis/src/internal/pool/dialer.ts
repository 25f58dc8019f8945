// How the dedicated pool opens its connections, whichever client library they belong to: node-redis
// (nodeRedisDialer.ts) or another (the ioredis backend's Cluster). The pool only needs to connect
// one, send commands on it, tell whether its socket is still there, and close it for good. Nothing
// here loads a client library.
import type * as Address from "../connection/address.ts"
import type { Classify } from "../connection/failures.ts"

/** One connection the pool opened. It never reconnects: a broken one is dropped and replaced. */
export interface PoolClient {
  /** False once its socket closed (dropped, or closed by the pool). */
  readonly isOpen: boolean
  /** Connected, and not closed since. */
  readonly isReady: boolean
  connect(): Promise<unknown>
  /** Sends one command; `timeout: 0` asks the client not to time it out itself (the pool does). */
  sendCommand(args: Array<string>, options?: { readonly timeout?: number }): Promise<unknown>
}

/** Opens the pool's connections, closes them, and reads their failures. */
export interface Dialer {
  /** A connection to `node`, not connected yet. */
  readonly open: (node: Address.HostPort) => PoolClient
  /** Closes `client` for good, whatever state it is in (connecting, ready, closing). */
  readonly destroy: (client: PoolClient) => void
  readonly classify: Classify
}
