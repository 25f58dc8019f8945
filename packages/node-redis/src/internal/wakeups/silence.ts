// A subscriber connection the lock opens itself can go silent (see connection/silentConnection.ts):
// still reported ready, subscribed, and no message ever comes. Waiters then only poll. So when a
// wait runs out without a message, the connection its channel is on is asked `PING` (at most once
// per `silentAfterMillis` for each connection); if that goes unanswered for `silentAfterMillis`, the
// connection is discarded and every channel in use is subscribed again (those that were on it, on a
// new one).
import * as Effect from "effect/Effect"
import type * as Context from "effect/Context"
import { type Probed, silenceProbe, silentAfterMillis } from "../connection/silenceProbe.ts"
import { subscribeOn, type Subscriptions } from "./channels.ts"

/**
 * What to do when a wait on a channel ran out without a message: now and then, see whether its
 * connection answers, and replace it if it does not.
 */
export const silenceWatch = (subs: Subscriptions, context: Context.Context<never>): ((channel: string) => void) => {
  // A subscriber connection that answers nothing is replaced: every channel in use is subscribed
  // again (a channel still subscribed on a live connection sends nothing).
  const onSilent = (silent: Probed, silentFor: number): void => {
    // The subscriber in use says whether `silent` is still one of its connections.
    if (subs.closed || subs.settled?.discard?.(silent) !== true) return
    subs.connected = undefined
    subs.settled = undefined
    for (const [channel, entry] of subs.channels) subscribeOn(subs, channel, entry)
    Effect.runForkWith(context)(
      Effect.logWarning(
        `redis subscriber connection answered nothing for ${silentFor} ms while reported ready; closed, and the ${subs.channels.size} channel(s) in use subscribed again`
      )
    )
  }
  // Each connection's probe, and when it last ran.
  const probes = new WeakMap<Probed, { readonly probe: () => void; at: number }>()
  /** A wait on `channel` ran out without a message: now and then, see whether its connection answers. */
  return (channel) => {
    const connection = subs.closed ? undefined : subs.settled?.probed?.(channel)
    if (connection === undefined) return
    let watched = probes.get(connection)
    if (watched === undefined) {
      const probe = silenceProbe(() => (subs.closed ? undefined : connection), onSilent, silentAfterMillis, "PING")
      watched = { probe, at: -Infinity }
      probes.set(connection, watched)
    }
    const now = performance.now()
    if (now - watched.at < silentAfterMillis) return
    watched.at = now
    watched.probe()
  }
}
