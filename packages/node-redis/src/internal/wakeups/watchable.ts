// A subscriber that a backend outside this package opens (`CommandBackend.Subscriber`), as the
// wake-ups drive it: with its own connection, when it names one, probed for silence (silence.ts).
import type { Subscriber } from "./subscriber.ts"

/** `CommandBackend.Subscriber`, as read here. */
interface PublicSubscriber {
  readonly subscribe: Subscriber["subscribe"]
  readonly unsubscribe: Subscriber["unsubscribe"]
  readonly connection?:
    | {
        readonly isReady: boolean
        readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
        readonly close: () => void
      }
    | undefined
}

/** A subscriber as the wake-ups drive it: its own connection, if it has one, probed for silence. */
export const watchable = (subscriber: PublicSubscriber): Subscriber => {
  const { connection } = subscriber
  const subscribing = {
    subscribe: (channel: string, listener: (message: string) => void) => subscriber.subscribe(channel, listener),
    unsubscribe: (channel: string, listener: (message: string) => void) => subscriber.unsubscribe(channel, listener)
  }
  if (connection === undefined) return subscribing
  const probed = {
    get isReady() {
      return connection.isReady
    },
    sendCommand: (args: Array<string>) => connection.send(args)
  }
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
