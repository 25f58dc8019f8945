// The connections the Sentinel topology opens, whichever client library they belong to: one to each
// sentinel (for its questions) and one to the master (for wake-ups). node-redis's are
// nodeRedisLinks.ts; the ioredis backend brings its own. Nothing here loads a client library.
import type * as Address from "../../connection/address.ts"
import type { Classify } from "../../connection/failures.ts"
import type { CommandClient } from "../../connection/sending.ts"
import type { Probed } from "../../connection/silenceProbe.ts"

/**
 * A connection to one sentinel. It connects, and reconnects, in the background, and refuses a
 * question at once while disconnected (another sentinel answers it).
 */
export type SentinelLink = CommandClient

/** A connection to the master for wake-ups, subscribed to the channels in use. */
export interface SubscriberLink extends Probed {
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
}

/** Opens and closes the Sentinel topology's connections, and reads their failures. */
export interface Links {
  readonly sentinel: (node: Address.HostPort) => SentinelLink
  /**
   * A subscriber connection to `node`, not connected yet; it reconnects by itself. Without it,
   * waiters poll.
   */
  readonly subscriber?: ((node: Address.HostPort) => SubscriberLink) | undefined
  /** Closes a link for good, whatever state it is in. */
  readonly destroy: (link: SentinelLink | SubscriberLink) => void
  readonly classify: Classify
}

/** What the wake-up subscriber needs of the links: opening a subscriber connection, and closing it. */
export interface SubscriberLinks {
  readonly subscriber: (node: Address.HostPort) => SubscriberLink
  readonly destroy: Links["destroy"]
}
