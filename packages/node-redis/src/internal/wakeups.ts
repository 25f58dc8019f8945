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
// A subscriber connection the lock opens itself can also go silent (see silentConnection.ts): still
// reported ready, subscribed, and no message ever comes. Waiters then only poll. So when a wait runs
// out without a message, the connection its channel is on is asked `PING` (at most once per
// `silentAfterMillis` for each connection); if that goes unanswered for `silentAfterMillis`, the
// connection is discarded and every channel in use is subscribed again (those that were on it, on a
// new one).
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Granted, Next, Wakeups } from "@sage/lock/LockBackend"
import type { LockRedisError } from "@sage/lock/LockError"
import { LockScripts } from "@sage/lock"
import { classify } from "./classify.ts"
import { type Probed, silenceProbe, silentAfterMillis } from "./silentConnection.ts"
import { timerDelay } from "./timerDelay.ts"

/** How a backend subscribes: plain channels (standalone, Sentinel) or sharded ones (Cluster). */
export interface Subscriber {
  readonly subscribe: (channel: string, listener: (message: string) => void) => Promise<unknown>
  /** Drops `listener` from `channel` (on a shared client, other listeners on it stay). */
  readonly unsubscribe: (channel: string, listener: (message: string) => void) => Promise<unknown>
  /**
   * The connection `channel` is subscribed on, to probe for silence, or `undefined` while there is
   * none. Only where the lock owns that connection: one the application shares is left to it.
   */
  readonly probed?: ((channel: string) => Probed | undefined) | undefined
  /**
   * Closes `silent` for good if it is still in use, and says whether it was: the next `subscribe`
   * on its channels opens another (for a subscriber that opens its connection once, the next call of
   * `make`'s `subscriber` does).
   */
  readonly discard?: ((silent: Probed) => boolean) | undefined
}

/** What a message tells the waiter it names: a grant, that the waiter ahead was served, or a wake-up. */
type Message = Granted | Next | undefined

interface Channel {
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

/** Subscriptions unused for this long are dropped. */
const idleMillis = 60_000

/** A wake-up that arrived before its waiter started waiting counts for this long. */
const earlyWakeMillis = 1_000

/** Early wake-ups a channel keeps before the stale ones are dropped. */
const earlyPruneSize = 64

export const make = (options: {
  /** Connects the subscriber on first use; a failure leaves waiters on their retry schedule. */
  readonly subscriber: () => Promise<Subscriber>
  readonly leave: (key: string, waiterId: string, timeoutMillis: number) => Effect.Effect<void>
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
    const channels = new Map<string, Channel>()
    let connected: Promise<Subscriber> | undefined
    // The subscriber `connected` resolved to, once it has.
    let settled: Subscriber | undefined
    let closed = false
    const subscriber = (): Promise<Subscriber> => {
      if (connected !== undefined) return connected
      const attempt: Promise<Subscriber> = options.subscriber().then(
        (sub) => {
          if (connected === attempt) settled = sub
          return sub
        },
        (error: unknown) => {
          if (connected === attempt) connected = undefined
          throw error
        }
      )
      connected = attempt
      return attempt
    }

    const onMessage = (channel: string) => (text: string) => {
      const entry = channels.get(channel)
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
    const subscribeOn = (channel: string, entry: Channel): void => {
      const attempt: Promise<LockRedisError | undefined> = subscriber()
        .then((sub) => sub.subscribe(channel, entry.listener))
        .then(
          () => undefined,
          (error: unknown) => {
            // Not subscribed: forget it, so the next wait tries again. Unless a later attempt has
            // taken over: a discarded silent connection fails the subscriptions pending on it after
            // they were sent again on its replacement, and those must stay.
            if (channels.get(channel) === entry && entry.ready === attempt) channels.delete(channel)
            return classify("subscribe", error)
          }
        )
      entry.ready = attempt
    }

    const open = (channel: string): Channel => {
      const entry: Channel = {
        waiting: new Map(),
        early: new Map(),
        listener: onMessage(channel),
        ready: Promise.resolve(undefined),
        lastUsed: performance.now()
      }
      subscribeOn(channel, entry)
      channels.set(channel, entry)
      return entry
    }

    // A subscriber connection that answers nothing is replaced: every channel in use is subscribed
    // again (a channel still subscribed on a live connection sends nothing).
    const onSilent = (silent: Probed, silentFor: number): void => {
      // The subscriber in use says whether `silent` is still one of its connections.
      if (closed || settled?.discard?.(silent) !== true) return
      connected = undefined
      settled = undefined
      for (const [channel, entry] of channels) subscribeOn(channel, entry)
      Effect.runForkWith(context)(
        Effect.logWarning(
          `redis subscriber connection answered nothing for ${silentFor} ms while reported ready; closed, and the ${channels.size} channel(s) in use subscribed again`
        )
      )
    }
    // Each connection's probe, and when it last ran.
    const probes = new WeakMap<Probed, { readonly probe: () => void; at: number }>()
    /** A wait on `channel` ran out without a message: now and then, see whether its connection answers. */
    const lapsed = (channel: string): void => {
      const connection = closed ? undefined : settled?.probed?.(channel)
      if (connection === undefined) return
      let watched = probes.get(connection)
      if (watched === undefined) {
        const probe = silenceProbe(() => (closed ? undefined : connection), onSilent, silentAfterMillis, "PING")
        watched = { probe, at: -Infinity }
        probes.set(connection, watched)
      }
      const now = performance.now()
      if (now - watched.at < silentAfterMillis) return
      watched.at = now
      watched.probe()
    }

    if (options.unsubscribeOnClose !== true) {
      // A subscription still being set up when the scope closes would open its connection after the
      // client's close (a Cluster client opens a shard's pub/sub connection on first use) and keep
      // the process alive: let it finish first, within a second, so the close that follows sees it.
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => Promise.all([...channels.values()].map((entry) => entry.ready))).pipe(
          Effect.timeoutOption(1_000),
          Effect.asVoid
        )
      )
    } else {
      yield* Effect.addFinalizer(() =>
        Effect.promise(() =>
          Promise.all(
            [...channels].map(([channel, entry]) =>
              entry.ready.then(() => connected?.then((sub) => sub.unsubscribe(channel, entry.listener)))
            )
          ).catch(() => undefined)
        ).pipe(Effect.timeoutOption(1_000), Effect.asVoid)
      )
    }

    // Drop subscriptions nobody used for a while.
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.andThen(
          Effect.sleep(idleMillis / 2),
          Effect.sync(() => {
            const cutoff = performance.now() - idleMillis
            for (const [channel, entry] of channels) {
              if (entry.waiting.size > 0 || entry.lastUsed > cutoff) continue
              channels.delete(channel)
              void subscriber()
                .then((sub) => sub.unsubscribe(channel, entry.listener))
                .catch(() => undefined)
            }
          })
        )
      )
    )

    const awaitWake = (
      key: string,
      waiterId: string,
      millis: number
    ): Effect.Effect<boolean | Granted | Next, LockRedisError> =>
      Effect.suspend(() => {
        const channel =
          waiterId.startsWith(LockScripts.grantingWaiterPrefix) ||
          waiterId.startsWith(LockScripts.ownChannelWaiterPrefix)
            ? LockScripts.grantChannel(key, waiterId)
            : LockScripts.wakeChannel(key)
        const existing = channels.get(channel)
        if (existing === undefined) {
          // A fresh subscription may have missed a release: once it is in place, retry at once.
          const entry = open(channel)
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
        existing.lastUsed = performance.now()
        const early = existing.early.get(waiterId)
        if (early !== undefined) {
          existing.early.delete(waiterId)
          // A recent wake-up for this waiter came in just before it started waiting: act on it.
          if (existing.lastUsed - early < earlyWakeMillis) return Effect.succeed(true)
        }
        let resumers = existing.waiting.get(waiterId)
        if (resumers === undefined) {
          resumers = new Set()
          existing.waiting.set(waiterId, resumers)
        }
        const set = resumers
        // One callback with its own timer, not a race against a sleep: a race forks two fibers and
        // tears them down on every wake-up, on the path from a release to the next body.
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
      })

    // Added last, so it runs first: no probe may replace a connection while the scope closes.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
      })
    )

    return { await: awaitWake, leave: options.leave, grants: options.grants === true } satisfies Wakeups
  })

/** The suffix of a message telling a waiter that the one ahead of it was served: `<id>:next:<claim ms>`. */
const nextMarker = ":next:"

/**
 * A message read: `<waiter id>` wakes that waiter; `<waiter id>:<fence>:<claim ms>` hands it the lock
 * (`Granted`); `<waiter id>:next:<claim ms>` tells it the waiter ahead was served (`Next`).
 */
const messageOf = (text: string): { readonly waiterId: string; readonly message: Message } => {
  const end = text.lastIndexOf(":")
  const start = end > 0 ? text.lastIndexOf(":", end - 1) : -1
  if (start <= 0) return { waiterId: text, message: undefined }
  const claimMillis = Number(text.slice(end + 1))
  if (!Number.isSafeInteger(claimMillis) || claimMillis <= 0) return { waiterId: text, message: undefined }
  const waiterId = text.slice(0, start)
  if (text.startsWith(nextMarker, start)) return { waiterId, message: { _tag: "Next", claimMillis } }
  const fence = Number(text.slice(start + 1, end))
  if (!Number.isSafeInteger(fence) || fence <= 0) return { waiterId: text, message: undefined }
  return {
    waiterId,
    message: { _tag: "Granted", token: text.slice(0, end), fence, leaseMillis: claimMillis }
  }
}
