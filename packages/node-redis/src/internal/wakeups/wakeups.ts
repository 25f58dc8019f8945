// Cross-process wake-up for waiters: one subscriber connection per backend (node-redis keeps one per
// shard on Cluster), shared by every waiter of every lock client over it.
//
// A waiter subscribes to its own channel for a lock (`LockScripts.grantChannel`) the first time it
// waits for that lock; the subscription stays while the channel is in use and is dropped after a
// minute of disuse, so a hot key does not pay SUBSCRIBE/UNSUBSCRIBE per wait. A release names the
// waiter whose turn it is on that channel, so no other process wakes, and the release can tell from
// the message's reach whether anybody still listens. On Sentinel and Cluster the message is the
// waiter's id (see `LockScripts.ownChannelWaiterPrefix`): it resumes to ask. On standalone the
// release hands the lock straight to the waiter (`LockScripts.grantingWaiterPrefix`): the message is
// then `<id>:<fence>:<claim ms>`, and the waiter resumes holding the lock (`Granted`). Waiters of
// earlier versions (plain ids) are named on the lock's shared channel, which this module still
// serves. The waiter behind the one served hears `<id>:next:<claim ms>` (`Next`), and asks when that
// claim window ends should the lock not be taken. node-redis resubscribes after a reconnect or failover (and follows slot moves on
// Cluster); any message lost meanwhile only costs the waiter its retry delay.
//
// A subscription the server refuses for good (`NOPERM`) fails the wait, and so the call, with that
// error; a temporary failure (the subscriber cannot connect) lets the wait run its course, so a
// waiter tries to subscribe once a wait at most.
//
// A subscriber connection the lock opens itself can also go silent: then it is replaced (silence.ts).
//
// The steps: the channels and their subscriber connection (channels.ts), reading a message
// (messages.ts), the wait itself (wait.ts), and the silence probe (silence.ts).
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Wakeups } from "@sage/lock/LockBackend"
import type { Classify } from "../connection/failures.ts"
import { dropIdle, makeSubscriptions } from "./channels.ts"
import { silenceWatch } from "./silence.ts"
import type { Subscriber } from "./subscriber.ts"
import { awaiting } from "./wait.ts"

export const make = (options: {
  /** Connects the subscriber on first use; a failure leaves waiters on their retry schedule. */
  readonly subscriber: () => Promise<Subscriber>
  /** Reads a failed subscription (the subscriber's client's own errors). */
  readonly classify: Classify
  readonly leave: Wakeups["leave"]
  /**
   * Unsubscribe every channel when the scope closes (at most a second): for a subscriber on a
   * client the application owns and keeps using. A subscriber the lock owns is simply closed.
   */
  readonly unsubscribeOnClose?: boolean | undefined
  /** Whether releases over this backend hand the lock to granting waiters (see `Wakeups.grants`). */
  readonly grants?: boolean | undefined
}): Effect.Effect<Wakeups, never, Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context<never>()
    const subs = makeSubscriptions(options.subscriber, options.classify)
    const lapsed = silenceWatch(subs, context)

    if (options.unsubscribeOnClose !== true) {
      // A subscription still being set up when the scope closes would open its connection after the
      // client's close (a Cluster client opens a shard's pub/sub connection on first use) and keep
      // the process alive: let it finish first, within a second, so the close that follows sees it.
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => Promise.all([...subs.channels.values()].map((entry) => entry.ready))).pipe(
          Effect.timeoutOption(1_000),
          Effect.asVoid
        )
      )
    } else {
      yield* Effect.addFinalizer(() =>
        Effect.promise(() =>
          Promise.all(
            [...subs.channels].map(([channel, entry]) =>
              entry.ready.then(() => subs.connected?.then((sub) => sub.unsubscribe(channel, entry.listener)))
            )
          ).catch(() => undefined)
        ).pipe(Effect.timeoutOption(1_000), Effect.asVoid)
      )
    }

    // Drop subscriptions nobody used for a while.
    yield* Effect.forkScoped(dropIdle(subs))

    // Added last, so it runs first: no probe may replace a connection while the scope closes.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        subs.closed = true
      })
    )

    return { await: awaiting(subs, lapsed), leave: options.leave, grants: options.grants === true } satisfies Wakeups
  })
