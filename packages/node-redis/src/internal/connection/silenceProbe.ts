// Asking a connection that let a command time out whether it still answers at all: the probe behind
// every replacement of a silent connection (see silentConnection.ts), for the standalone layer's
// connections, the pool's shared ones and the wake-up subscribers.
import { timerDelay } from "./timerDelay.ts"

/**
 * How long a connection that node-redis reports ready may leave a `TIME` unanswered, after one of
 * its commands timed out, before it is taken out of service. Longer than the server stalls the lock rides out
 * without losing a lease (a script or `DEBUG SLEEP` of a few seconds).
 */
export const silentAfterMillis = 5_000

/** What a probe needs of a connection: commands, and whether node-redis counts it as ready. */
export interface Probed {
  readonly isReady: boolean
  sendCommand(args: Array<string>, options?: { readonly timeout?: number }): Promise<unknown>
}

/**
 * An `onNoReply` for a connection: asks it `TIME` (one at a time, and only while node-redis counts
 * it as ready) and calls `onSilent` with how long it went unanswered when no answer, not even an
 * error, comes within `limitMillis`. `connection` returns the connection to probe now, or
 * `undefined` to skip. A subscriber connection is asked `PING` instead (`command`): a subscribed
 * RESP2 connection refuses every other question.
 */
export const silenceProbe = (
  connection: () => Probed | undefined,
  onSilent: (silent: Probed, silentForMillis: number) => void,
  limitMillis: number = silentAfterMillis,
  command: "TIME" | "PING" = "TIME"
): (() => void) => {
  // The probe in flight, if any: a late answer to an earlier probe must not settle a later one.
  let probing: object | undefined
  return () => {
    const probed = connection()
    if (probing !== undefined || probed === undefined || !probed.isReady) return
    const probe = {}
    probing = probe
    // Monotonic: only for the duration the warning reports.
    const started = performance.now()
    const timer = setTimeout(() => {
      if (probing !== probe) return
      probing = undefined
      onSilent(probed, Math.round(performance.now() - started))
    }, timerDelay(limitMillis))
    const settle = (): void => {
      if (probing !== probe) return
      probing = undefined
      clearTimeout(timer)
    }
    // `TIME` by default: every lock user may run it (the scripts call it), and it touches nothing. Any answer,
    // an error too (a user without `ping`), shows the connection is alive.
    probed.sendCommand([command], { timeout: 0 }).then(settle, settle)
  }
}
