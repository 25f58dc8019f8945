// Wake-ups over ioredis: one duplicate of the lock's client, owned by the lock, connected the first
// time a lock is waited for, every channel on it, closed with the scope. ioredis subscribes its
// channels again after a reconnect; a message lost meanwhile costs a waiter its poll.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Redis } from "ioredis"
import type { Subscriber } from "@sage/lock-node-redis/CommandBackend"
import { type Channels, channels } from "./channels.ts"
import { close } from "./close.ts"
import { sendOn } from "./send.ts"

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
      const { subscriber } = subscribing(duplicate)
      await duplicate.connect().catch((error: unknown) => {
        duplicate.disconnect()
        throw error
      })
      return {
        ...subscriber,
        // Watched for silence: a duplicate that answers no PING for 5 s is closed, and the next wait
        // opens another.
        connection: {
          get isReady() {
            return duplicate.status === "ready"
          },
          send: sendOn(duplicate),
          close: () => duplicate.disconnect()
        }
      }
    }
  })

/**
 * The lock's channels on a subscriber connection of its own (made with `autoResubscribe: false`):
 * after a reconnect, the channels in use are subscribed again; a refusal leaves their waiters
 * polling (wake-ups are a shortcut), and a later wait on a dropped channel subscribes it anew.
 */
export const subscribing = (redis: Redis): Pick<Channels, "subscriber" | "drop"> => {
  const { deliver, subscribed, subscriber, drop } = channels({
    subscribe: (channel) => redis.subscribe(channel),
    unsubscribe: (channel) => redis.unsubscribe(channel)
  })
  let connectedOnce = false
  redis.on("ready", () => {
    if (!connectedOnce) {
      connectedOnce = true
      return
    }
    for (const channel of subscribed()) redis.subscribe(channel).catch(() => undefined)
  })
  redis.on("message", deliver)
  return { subscriber, drop }
}
