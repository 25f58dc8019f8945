// The lock's listeners on a subscriber connection of its own: each channel subscribed once on the
// connection, whatever number of listeners it has here, and unsubscribed with its last one.
import type { Subscriber } from "@sage/lock-node-redis/CommandBackend"

export interface Channels {
  /** Delivers a message that arrived on `channel` to its listeners. */
  readonly deliver: (channel: string, message: string) => void
  /** The channels with listeners, to subscribe again after a reconnect. */
  readonly subscribed: () => Iterable<string>
  readonly subscriber: Subscriber
  /** Drops every listener of `channel`, and unsubscribes it. */
  readonly drop: (channel: string) => Promise<unknown>
}

export const channels = (connection: {
  readonly subscribe: (channel: string) => Promise<unknown>
  readonly unsubscribe: (channel: string) => Promise<unknown>
}): Channels => {
  const listeners = new Map<string, Set<(message: string) => void>>()
  return {
    deliver: (channel, message) => {
      const forChannel = listeners.get(channel)
      if (forChannel !== undefined) for (const listener of forChannel) listener(message)
    },
    subscribed: () => listeners.keys(),
    subscriber: {
      subscribe: async (channel, listener) => {
        const forChannel = listeners.get(channel) ?? new Set()
        forChannel.add(listener)
        listeners.set(channel, forChannel)
        await connection.subscribe(channel)
      },
      unsubscribe: async (channel, listener) => {
        const forChannel = listeners.get(channel)
        forChannel?.delete(listener)
        if (forChannel !== undefined && forChannel.size > 0) return
        listeners.delete(channel)
        await connection.unsubscribe(channel)
      }
    },
    drop: (channel) => {
      listeners.delete(channel)
      return connection.unsubscribe(channel)
    }
  }
}
