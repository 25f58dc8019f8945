// The wait for a wake-up (`Wakeups.await`): on the waiter's channel, until a message names it, or
// its time runs out. The first wait on a channel waits for the subscription instead, and then has
// the waiter ask at once (a fresh subscription may have missed a release).
import * as Effect from "effect/Effect"
import type { Granted, Next, Wakeups } from "@sage/lock/LockBackend"
import type { LockRedisError } from "@sage/lock/LockError"
import { LockScripts } from "@sage/lock"
import { timerDelay } from "../connection/timerDelay.ts"
import { type Channel, earlyWakeMillis, open, type Subscriptions } from "./channels.ts"
import type { Message } from "./messages.ts"

/** `Wakeups.await` over `subs`; `lapsed` is told of a wait that ran out without a message. */
export const awaiting =
  (subs: Subscriptions, lapsed: (channel: string) => void): Wakeups["await"] =>
  (key, waiterId, millis) =>
    Effect.suspend(() => {
      const channel =
        waiterId.startsWith(LockScripts.grantingWaiterPrefix) || waiterId.startsWith(LockScripts.ownChannelWaiterPrefix)
          ? LockScripts.grantChannel(key, waiterId)
          : LockScripts.wakeChannel(key)
      const existing = subs.channels.get(channel)
      if (existing === undefined) return subscribing(open(subs, channel), channel, millis, lapsed)
      existing.lastUsed = performance.now()
      const early = existing.early.get(waiterId)
      if (early !== undefined) {
        existing.early.delete(waiterId)
        // A recent wake-up for this waiter came in just before it started waiting: act on it.
        if (existing.lastUsed - early < earlyWakeMillis) return Effect.succeed(true)
      }
      return waitOn(existing, channel, waiterId, millis, lapsed)
    })

/** A fresh subscription may have missed a release: once it is in place, retry at once. */
const subscribing = (
  entry: Channel,
  channel: string,
  millis: number,
  lapsed: (channel: string) => void
): Effect.Effect<boolean, LockRedisError> => {
  const startedAt = performance.now()
  return Effect.promise(() => entry.ready).pipe(
    Effect.timeoutOption(Math.max(1, millis)),
    Effect.flatMap((done): Effect.Effect<boolean, LockRedisError> => {
      if (done._tag === "None") {
        lapsed(channel)
        return Effect.succeed(false)
      }
      const failure = done.value
      if (failure === undefined) return Effect.succeed(true)
      // Refused for good (the user may not subscribe): the call fails now, as a refused
      // acquisition would. Otherwise the waiter polls at its usual pace, which the rest of
      // this wait keeps: one subscription attempt a wait, never a loop of them.
      if (!failure.retryable) return Effect.fail(failure)
      const left = Math.ceil(millis - (performance.now() - startedAt))
      return left > 0 ? Effect.as(Effect.sleep(left), false) : Effect.succeed(false)
    })
  )
}

/**
 * Waits on a subscribed channel for a message naming `waiterId`. One callback with its own timer,
 * not a race against a sleep: a race forks two fibers and tears them down on every wake-up, on the
 * path from a release to the next body.
 */
const waitOn = (
  existing: Channel,
  channel: string,
  waiterId: string,
  millis: number,
  lapsed: (channel: string) => void
): Effect.Effect<boolean | Granted | Next> => {
  let resumers = existing.waiting.get(waiterId)
  if (resumers === undefined) {
    resumers = new Set()
    existing.waiting.set(waiterId, resumers)
  }
  const set = resumers
  return Effect.callback<boolean | Granted | Next>((resume) => {
    let done = false
    const forget = () => {
      done = true
      set.delete(resumeFiber)
      if (set.size === 0 && existing.waiting.get(waiterId) === set) existing.waiting.delete(waiterId)
    }
    const resumeFiber = (message: Message) => {
      if (done) return
      forget()
      resume(Effect.succeed(message ?? true))
      // After the fiber has gone on to its body: clearing a timer is off that path.
      clearTimeout(timer)
    }
    set.add(resumeFiber)
    const timer = setTimeout(() => {
      if (done) return
      forget()
      resume(Effect.succeed(false))
      lapsed(channel)
    }, timerDelay(millis))
    const stop = () => {
      if (!done) forget()
      clearTimeout(timer)
    }
    return Effect.sync(stop)
  })
}
