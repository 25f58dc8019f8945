// The channels a backend's waiters listen on: the subscriber connection they share (connected on
// first use, and again after it failed or was discarded), each channel's subscription and its
// waiters, the delivery of a message to the waiter it names, and the dropping of channels nobody
// used for a while.
import * as Effect from "effect/Effect"
import type { LockRedisError } from "@sage/lock/LockError"
import type { Classify } from "../connection/failures.ts"
import { type Message, messageOf } from "./messages.ts"
import type { Subscriber } from "./subscriber.ts"

export interface Channel {
  /** Resumers of the fibers waiting on this channel, by waiter id (given what the message said). */
  readonly waiting: Map<string, Set<(message: Message) => void>>
  /**
   * Wake-ups that arrived before their waiter started waiting (the release can reach this process
   * before the busy reply that registered the waiter has been handled), by waiter id: when. A
   * grant among them only counts as a wake-up: the waiter's next attempt takes the granted key.
   */
  readonly early: Map<string, number>
  /**
   * Settles when the subscription is in place (`undefined`), or with why it failed (the channel is
   * then forgotten, and the next wait subscribes again). Replaced when the channel is subscribed
   * again on a new connection.
   */
  ready: Promise<LockRedisError | undefined>
  readonly listener: (message: string) => void
  lastUsed: number
}

/** A backend's subscriber connection and the channels in use on it. */
export interface Subscriptions {
  /** Connects the subscriber on first use; a failure leaves waiters on their retry schedule. */
  readonly connect: () => Promise<Subscriber>
  /** Reads a failed subscription (the subscriber's client's own errors). */
  readonly classify: Classify
  readonly channels: Map<string, Channel>
  connected: Promise<Subscriber> | undefined
  /** The subscriber `connected` resolved to, once it has. */
  settled: Subscriber | undefined
  closed: boolean
}

/** Subscriptions unused for this long are dropped. */
const idleMillis = 60_000

/** A wake-up that arrived before its waiter started waiting counts for this long. */
export const earlyWakeMillis = 1_000

/** Early wake-ups a channel keeps before the stale ones are dropped. */
const earlyPruneSize = 64

export const makeSubscriptions = (connect: () => Promise<Subscriber>, classify: Classify): Subscriptions => ({
  connect,
  classify,
  channels: new Map(),
  connected: undefined,
  settled: undefined,
  closed: false
})

/** The subscriber, connecting it if no attempt is under way or done. */
export const subscriber = (subs: Subscriptions): Promise<Subscriber> => {
  if (subs.connected !== undefined) return subs.connected
  const attempt: Promise<Subscriber> = subs.connect().then(
    (sub) => {
      if (subs.connected === attempt) subs.settled = sub
      return sub
    },
    (error: unknown) => {
      if (subs.connected === attempt) subs.connected = undefined
      throw error
    }
  )
  subs.connected = attempt
  return attempt
}

/** Hands a message on `channel` to the waiter it names (or keeps it, if that waiter is not waiting yet). */
const listenerFor =
  (subs: Subscriptions, channel: string) =>
  (text: string): void => {
    const entry = subs.channels.get(channel)
    if (entry === undefined) return
    const { waiterId, message } = messageOf(text)
    const resumers = entry.waiting.get(waiterId)
    if (resumers === undefined || resumers.size === 0) {
      // A waiter that is not waiting has nothing to wait out: it is attempting, or already served.
      if (message?._tag === "Next") return
      // Most of these name waiters of other processes, which never come to claim them: forget the
      // stale ones now and then, so a key that is never idle does not collect every id it saw.
      const now = performance.now()
      if (entry.early.size >= earlyPruneSize) {
        for (const [id, at] of entry.early) if (now - at >= earlyWakeMillis) entry.early.delete(id)
      }
      entry.early.set(waiterId, now)
      return
    }
    // One fiber per client and key waits at the server; should there be more, only one is handed
    // the grant, and the others are woken to try (they find the key taken).
    // Taken out first: a fiber resumed here may wait again at once (after `Next`), in this same set.
    let told = message
    for (const resume of Array.from(resumers)) {
      resume(told)
      if (told?._tag === "Granted") told = undefined
    }
  }

/** Subscribes `entry` to `channel`, as its current attempt (`entry.ready`). */
export const subscribeOn = (subs: Subscriptions, channel: string, entry: Channel): void => {
  const attempt: Promise<LockRedisError | undefined> = subscriber(subs)
    .then((sub) => sub.subscribe(channel, entry.listener))
    .then(
      () => undefined,
      (error: unknown) => {
        // Not subscribed: forget it, so the next wait tries again. Unless a later attempt has
        // taken over: a discarded silent connection fails the subscriptions pending on it after
        // they were sent again on its replacement, and those must stay.
        if (subs.channels.get(channel) === entry && entry.ready === attempt) subs.channels.delete(channel)
        return subs.classify("subscribe", error)
      }
    )
  entry.ready = attempt
}

/** A channel in use from now on, its subscription under way. */
export const open = (subs: Subscriptions, channel: string): Channel => {
  const entry: Channel = {
    waiting: new Map(),
    early: new Map(),
    listener: listenerFor(subs, channel),
    ready: Promise.resolve(undefined),
    lastUsed: performance.now()
  }
  subscribeOn(subs, channel, entry)
  subs.channels.set(channel, entry)
  return entry
}

/** Drops, every half `idleMillis`, the subscriptions nobody used for `idleMillis`. */
export const dropIdle = (subs: Subscriptions): Effect.Effect<never> =>
  Effect.forever(
    Effect.andThen(
      Effect.sleep(idleMillis / 2),
      Effect.sync(() => {
        const cutoff = performance.now() - idleMillis
        for (const [channel, entry] of subs.channels) {
          if (entry.waiting.size > 0 || entry.lastUsed > cutoff) continue
          subs.channels.delete(channel)
          void subscriber(subs)
            .then((sub) => sub.unsubscribe(channel, entry.listener))
            .catch(() => undefined)
        }
      })
    )
  )
