// A subscriber that a backend outside this package opens (`CommandBackend.Subscriber`), as the
// wake-ups drive it: with its own connection, or one per shard, when it names them, probed for
// silence (silence.ts).
import type { Probed } from "../connection/silenceProbe.ts"
import type { Subscriber } from "./subscriber.ts"

/** `CommandBackend.SubscriberConnection`, as read here. */
interface Connection {
  readonly isReady: boolean
  readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
  readonly close: () => void
}

/** `CommandBackend.Subscriber`, as read here. */
interface PublicSubscriber {
  readonly subscribe: Subscriber["subscribe"]
  readonly unsubscribe: Subscriber["unsubscribe"]
  readonly connection?: Connection | undefined
  readonly connectionFor?: ((channel: string) => Connection | undefined) | undefined
}

const probedOf = (connection: Connection): Probed => ({
  get isReady() {
    return connection.isReady
  },
  sendCommand: (args: Array<string>) => connection.send(args)
})

/** A subscriber as the wake-ups drive it: its own connection, if it has one, probed for silence. */
export const watchable = (subscriber: PublicSubscriber): Subscriber => {
  const { connection, connectionFor } = subscriber
  const subscribing = {
    subscribe: (channel: string, listener: (message: string) => void) => subscriber.subscribe(channel, listener),
    unsubscribe: (channel: string, listener: (message: string) => void) => subscriber.unsubscribe(channel, listener)
  }
  if (connectionFor !== undefined) {
    // One probe per shard connection (the subscriber gives each back as the same object), and the
    // connection behind each probe, to close it.
    const probes = new WeakMap<Connection, Probed>()
    const behind = new WeakMap<Probed, Connection>()
    const closed = new WeakSet<Connection>()
    return {
      ...subscribing,
      probed: (channel) => {
        const shard = connectionFor(channel)
        if (shard === undefined || closed.has(shard)) return undefined
        let probed = probes.get(shard)
        if (probed === undefined) {
          probed = probedOf(shard)
          probes.set(shard, probed)
          behind.set(probed, shard)
        }
        return probed
      },
      discard: (silent) => {
        const shard = behind.get(silent)
        if (shard === undefined || closed.has(shard)) return false
        closed.add(shard)
        shard.close()
        return true
      }
    }
  }
  if (connection === undefined) return subscribing
  const probed = probedOf(connection)
  let closed = false
  return {
    ...subscribing,
    probed: () => (closed ? undefined : probed),
    discard: (silent) => {
      if (silent !== probed || closed) return false
      closed = true
      connection.close()
      return true
    }
  }
}
