// What wake-ups need of a subscriber connection, whichever deployment provides it: a standalone
// client's duplicate, a Sentinel master's connection, a Cluster client's sharded pub/sub, or a
// client the application shares.
import type { Probed } from "../connection/silenceProbe.ts"

/** How a backend subscribes: plain channels (standalone, Sentinel) or sharded ones (Cluster). */
export interface Subscriber {
  readonly subscribe: (channel: string, listener: (message: string) => void) => Promise<unknown>
  /** Drops `listener` from `channel` (on a shared client, other listeners on it stay). */
  readonly unsubscribe: (channel: string, listener: (message: string) => void) => Promise<unknown>
  /**
   * The connection `channel` is subscribed on, to probe for silence, or `undefined` while there is
   * none. Only where the lock owns that connection: one the application shares is left to it.
   */
  readonly probed?: ((channel: string) => Probed | undefined) | undefined
  /**
   * Closes `silent` for good if it is still in use, and says whether it was: the next `subscribe`
   * on its channels opens another (for a subscriber that opens its connection once, the next call of
   * `make`'s `subscriber` does).
   */
  readonly discard?: ((silent: Probed) => boolean) | undefined
}
