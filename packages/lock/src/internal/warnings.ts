// The warnings a lock client logs about its calls: a body completed but its release did not go as
// planned (not confirmed, late, or given up), or a lock held by a scope was lost. Each is logged as
// it happens, up to a budget a second. Past the budget the rest of that second is counted, by kind,
// and logged once as a summary when the second ends.
//
// They come in waves: when thousands of bodies end at once on an overloaded process, every release
// can be late (30,000 bodies with a 1 s lease ending together logged 28,000-30,000 of them). With
// Effect's default logger each costs the process 16-24 us (30,000 took 0.34-0.62 s, to a file or a
// pipe), at the moment it is shortest of time and the renewals of the locks still held are waiting
// for it. The summary keeps the count and one key of each kind; each call's span
// (`lock.release.result`) still says what happened to it.
import * as Effect from "effect/Effect"
import { withNow } from "./time.ts"

/** What went wrong: with a release after the body completed, or with a lock held by a scope. */
export type Kind = "unconfirmed" | "late" | "failed" | "scopeLost"

/** How the summary names each kind, before its count. */
const described: Record<Kind, string> = {
  unconfirmed: "releases not confirmed (the lease ran out while they were retried)",
  late: "releases that reached the server after the lease ran out (nobody held the lock in between)",
  failed: "releases that did not complete within one second (the lease frees the key)",
  scopeLost: "locks held by a scope that were lost before the scope closed"
}

const kinds: ReadonlyArray<Kind> = ["unconfirmed", "late", "failed", "scopeLost"]

/** How many warnings a client logs one by one in a second before it counts the rest. */
export const warningsPerSecond = 10

const windowMillis = 1_000

export interface Warnings {
  /** Logs `message` (about lock `key`), or counts it when this second's budget is spent. */
  readonly warn: (kind: Kind, key: string, message: string, cause?: unknown) => Effect.Effect<void>
}

export const make = (namespace: string): Warnings => {
  let windowStart = -Infinity
  let logged = 0
  let summaryDue = false
  const counted: Record<Kind, number> = { unconfirmed: 0, late: 0, failed: 0, scopeLost: 0 }
  const firstKey: Partial<Record<Kind, string>> = {}

  const summary = (): string => {
    let total = 0
    const parts: Array<string> = []
    for (const kind of kinds) {
      const count = counted[kind]
      if (count === 0) continue
      total += count
      parts.push(`${described[kind]}: ${count} (the first for lock ${firstKey[kind]})`)
      counted[kind] = 0
      delete firstKey[kind]
    }
    return (
      `lock client (namespace ${JSON.stringify(namespace)}): ${total} more warning${total === 1 ? " was" : "s were"} ` +
      `not logged in the last second (at most ${warningsPerSecond} a second are): ${parts.join("; ")}`
    )
  }

  // Logged from a fiber of its own when the second ends, so the count is never lost for want of a
  // later warning to carry it. It inherits the caller's logger and clock.
  const logSummary = Effect.suspend(() => {
    summaryDue = false
    return Effect.logWarning(summary())
  })

  return {
    warn: (kind, key, message, cause) =>
      withNow((now) => {
        if (now - windowStart >= windowMillis) {
          windowStart = now
          logged = 0
        }
        if (logged < warningsPerSecond) {
          logged++
          return cause === undefined ? Effect.logWarning(message) : Effect.logWarning(message, cause)
        }
        counted[kind]++
        firstKey[kind] ??= key
        if (summaryDue) return Effect.void
        summaryDue = true
        return Effect.asVoid(
          Effect.forkDetach(Effect.andThen(Effect.sleep(windowStart + windowMillis - now), logSummary))
        )
      })
  }
}
