// Wake-ups over ioredis: one duplicate of the lock's client, owned by the lock, connected the first
// time a lock is waited for, every channel on it, closed with the scope. ioredis subscribes its
// channels again after a reconnect; a message lost meanwhile costs a waiter its poll.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Redis } from "ioredis"
import type { Subscriber } from "@sage/lock-node-redis/CommandBackend"
import { channels } from "./channels.ts"
import { close } from "./close.ts"

/** What the subscriber needs of the client it duplicates. */
export type Duplicable = Pick<Redis, "duplicate">

export const duplicateSubscriber = (client: Duplicable): Effect.Effect<() => Promise<Subscriber>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const opened: Array<Redis> = []
    yield* Effect.addFinalizer(() => Effect.forEach(opened, close, { concurrency: "unbounded", discard: true }))
    return async () => {
      // ioredis's own resubscription after a reconnect leaves a refused SUBSCRIBE (an ACL change:
      // NOPERM) as an unhandled rejection, which ends the process: the lock resubscribes itself. Its
      // ready check needs INFO, which a least-privilege lock user may not run.
      const duplicate = client.duplicate({ lazyConnect: true, autoResubscribe: false, enableReadyCheck: false })
      // Without a listener ioredis prints every connection error; the waiters' polls cover an outage.
      duplicate.on("error", () => {})
      opened.push(duplicate)
      const { deliver, subscribed, subscriber } = channels({
        subscribe: (channel) => duplicate.subscribe(channel),
        unsubscribe: (channel) => duplicate.unsubscribe(channel)
      })
      // After a reconnect, the channels in use are subscribed again; a refusal leaves their waiters
      // polling (wake-ups are a shortcut), and a later wait on a dropped channel subscribes it anew.
      let connectedOnce = false
      duplicate.on("ready", () => {
        if (!connectedOnce) {
          connectedOnce = true
          return
        }
        for (const channel of subscribed()) duplicate.subscribe(channel).catch(() => undefined)
      })
      duplicate.on("message", deliver)
      await duplicate.connect().catch((error: unknown) => {
        duplicate.disconnect()
        throw error
      })
      return subscriber
    }
  })
