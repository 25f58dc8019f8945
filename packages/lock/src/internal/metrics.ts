// Recording the LockMetrics from the acquire/run/release sequence, in one place.
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import type { LockError } from "../LockError.ts"
import * as LockMetrics from "../LockMetrics.ts"
import type { AcquireOutcome } from "./acquire.ts"
import { nowMillis } from "./time.ts"

const count = (metric: Metric.Counter<number>, attributes: Record<string, string>) =>
  Metric.update(Metric.withAttributes(metric, attributes), 1)

export const lost = (namespace: string, phase: "acquire" | "renew" | "release"): Effect.Effect<void> =>
  count(LockMetrics.lost, { namespace, phase })

const outcomeOf = (error: LockError): string => {
  switch (error._tag) {
    case "TimedOut":
      return "timed_out"
    case "LockLost":
      return "lost"
    default:
      return "error"
  }
}

/** Wraps an acquisition: counts its outcome and, when acquired, how long the caller waited. */
export const trackAcquire = <E extends LockError>(
  namespace: string,
  acquisition: Effect.Effect<AcquireOutcome, E>
): Effect.Effect<AcquireOutcome, E> =>
  Effect.flatMap(nowMillis, (start) =>
    acquisition.pipe(
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) {
          if (exit.value._tag === "Busy") return count(LockMetrics.acquisitions, { namespace, outcome: "busy" })
          return Effect.flatMap(nowMillis, (end) =>
            Effect.andThen(
              count(LockMetrics.acquisitions, { namespace, outcome: "acquired" }),
              Metric.update(Metric.withAttributes(LockMetrics.waitTime, { namespace }), Duration.millis(end - start))
            )
          )
        }
        const error = Cause.findErrorOption(exit.cause)
        if (error._tag === "None") return Effect.void
        const recorded = count(LockMetrics.acquisitions, { namespace, outcome: outcomeOf(error.value) })
        return error.value._tag === "LockLost" ? Effect.andThen(recorded, lost(namespace, "acquire")) : recorded
      })
    )
  )

/** Counts a LockLost that renewal raised while the body ran. */
export const trackRun = <A, E>(namespace: string, exit: Exit.Exit<A, E>): Effect.Effect<void> => {
  if (Exit.isSuccess(exit)) return Effect.void
  const error = Cause.findErrorOption(exit.cause)
  return error._tag === "Some" && isLockLost(error.value) ? lost(namespace, "renew") : Effect.void
}

const isLockLost = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "LockLost"
