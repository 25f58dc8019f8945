// Capped exponential backoff with full-range jitter, never past a deadline.
//
// Delay for attempt n (0-based) is `min(cap, base * 2^n)` scaled by a random factor in [0.5, 1.0]
// (so waiters that collided spread out), then clamped to what is left of the budget and, when the
// holder's remaining lease is known, to just after that lease ends (polling earlier is pointless).
// Delays are whole milliseconds, like the clock they are measured against.
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"

export interface BackoffPolicy {
  readonly baseMillis: number
  readonly capMillis: number
}

/** The delay before retry `attempt`, given the time left and an optional hint from the server. */
export const nextDelay = (
  policy: BackoffPolicy,
  attempt: number,
  remainingMillis: number,
  holderRemainingMillis?: number
): Effect.Effect<number> =>
  Effect.map(Random.next, (random) => {
    const exponential = Math.min(policy.capMillis, policy.baseMillis * 2 ** Math.min(attempt, 30))
    let delay = exponential * (0.5 + random / 2)
    if (holderRemainingMillis !== undefined && holderRemainingMillis >= 0) {
      delay = Math.min(delay, holderRemainingMillis + 1)
    }
    return Math.max(0, Math.min(Math.ceil(delay), Math.floor(remainingMillis)))
  })
