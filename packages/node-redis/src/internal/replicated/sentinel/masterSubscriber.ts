// The wake-up subscriber of the Sentinel topology: one connection to the master the sentinels name,
// moved to the new master after a failover.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Address from "../../connection/address.ts"
import type { Subscriber } from "../../wakeups/subscriber.ts"
import type { SubscriberLink, SubscriberLinks } from "./links.ts"

type Client = SubscriberLink

/**
 * The wake-up subscriber: one connection to the current master, subscribed to the channels in use.
 * When the view's master changes (`follow`), it is replaced by a connection to the new master and
 * every channel is subscribed again; a message published meanwhile is lost, which costs a waiter
 * only its safety-net poll. A connection that went silent (`discard`) is dropped the same way: the
 * next `subscribe` opens another to the master of the view.
 */
export const masterSubscriber = (
  master: () => Address.HostPort | undefined,
  links: SubscriberLinks
): Effect.Effect<{ readonly subscriber: Subscriber; readonly follow: Effect.Effect<void> }, never, Scope.Scope> =>
  Effect.gen(function* () {
    const listeners = new Map<string, (message: string) => void>()
    // `raw` is kept beside the promise so that a connection is closed whatever state it is in: one
    // still connecting (its promise may not settle while the node is down) or one whose subscribe
    // failed would otherwise stay open, reconnecting, after the layer closed.
    let current: { readonly address: string; readonly raw: Client; readonly client: Promise<Client> } | undefined
    let closed = false
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        if (current !== undefined) links.destroy(current.raw)
        current = undefined
      })
    )
    const connectTo = (node: Address.HostPort): { readonly raw: Client; readonly ready: Promise<Client> } => {
      const client = links.subscriber(node)
      const ready = client.connect().then(async () => {
        for (const [channel, listener] of listeners) await client.subscribe(channel, listener)
        return client
      })
      ready.catch(() => links.destroy(client))
      return { raw: client, ready }
    }
    /** The connection to the master in the current view, replacing one to an older master. */
    const toMaster = (): Promise<Client> => {
      const node = master()
      if (closed) return Promise.reject(new Error("the lock backend is closed"))
      if (node === undefined) return Promise.reject(new Error("no master known"))
      const address = Address.format(node)
      if (current?.address === address) return current.client
      const previous = current
      const next = connectTo(node)
      const entry = { address, raw: next.raw, client: next.ready }
      current = entry
      next.ready.catch(() => {
        if (current === entry) current = undefined
      })
      if (previous !== undefined) links.destroy(previous.raw)
      return entry.client
    }
    const subscriber: Subscriber = {
      subscribe: (channel, listener) => {
        listeners.set(channel, listener)
        return toMaster().then((client) => client.subscribe(channel, listener))
      },
      unsubscribe: (channel) => {
        listeners.delete(channel)
        return current?.client.then((client) => client.unsubscribe(channel)) ?? Promise.resolve()
      },
      probed: () => current?.raw,
      discard: (silent) => {
        if (current === undefined || current.raw !== silent) return false
        links.destroy(current.raw)
        current = undefined
        return true
      }
    }
    const follow = Effect.sync(() => {
      const node = master()
      if (current === undefined || listeners.size === 0 || node === undefined) return
      if (current.address !== Address.format(node)) void toMaster().catch(() => undefined)
    })
    return { subscriber, follow }
  })
