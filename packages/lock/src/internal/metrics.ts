// Recording the LockMetrics of one lock client. The attribute sets are fixed per client (namespace,
// outcome, phase), so the metrics are bound to them once, when the client is made: an update on the
// hot path is then a single registry hit, with no attribute objects or metric keys built per call.
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as LockMetrics from "../LockMetrics.ts"
import type { AcquireOutcome } from "./acquire.ts"

export type Phase = "acquire" | "renew" | "release"

export interface ClientMetrics {
  /** Counts a `LockLost` seen by a caller, by phase. */
  readonly lost: (phase: Phase) => Effect.Effect<void>
  /** Records the outcome of an acquisition that started at `start` (monotonic ms) and ended at `end`. */
  readonly acquisition: (exit: Exit.Exit<AcquireOutcome, unknown>, start: number, end: number) => Effect.Effect<void>
  /** Counts a `LockLost` that renewal raised while the body ran. */
  readonly run: (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<void>
  /** A `tryWithLock` that found another fiber of its client holding or waiting for the key. */
  readonly busyInProcess: Effect.Effect<void>
  /** A `withLock` that timed out waiting behind another fiber of its client (no server attempt). */
  readonly timedOutInProcess: Effect.Effect<void>
}

const isTagged = (error: unknown, tag: string): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === tag

export const make = (namespace: string): ClientMetrics => {
  const outcome = (name: string) =>
    Metric.update(Metric.withAttributes(LockMetrics.acquisitions, { namespace, outcome: name }), 1)
  const acquired = outcome("acquired")
  const busy = outcome("busy")
  const timedOut = outcome("timed_out")
  const lostOutcome = outcome("lost")
  const failed = outcome("error")
  const waitTime = Metric.withAttributes(LockMetrics.waitTime, { namespace })
  const lostBy: Record<Phase, Effect.Effect<void>> = {
    acquire: Metric.update(Metric.withAttributes(LockMetrics.lost, { namespace, phase: "acquire" }), 1),
    renew: Metric.update(Metric.withAttributes(LockMetrics.lost, { namespace, phase: "renew" }), 1),
    release: Metric.update(Metric.withAttributes(LockMetrics.lost, { namespace, phase: "release" }), 1)
  }
  return {
    lost: (phase) => lostBy[phase],
    acquisition: (exit, start, end) => {
      if (Exit.isSuccess(exit)) {
        if (exit.value._tag === "Busy") return busy
        return Effect.andThen(acquired, Metric.update(waitTime, Duration.millis(end - start)))
      }
      const error = Cause.findErrorOption(exit.cause)
      if (error._tag === "None") return Effect.void
      if (isTagged(error.value, "TimedOut")) return timedOut
      if (isTagged(error.value, "LockLost")) return Effect.andThen(lostOutcome, lostBy.acquire)
      return failed
    },
    busyInProcess: busy,
    timedOutInProcess: timedOut,
    run: (exit) => {
      if (Exit.isSuccess(exit)) return Effect.void
      const error = Cause.findErrorOption(exit.cause)
      return error._tag === "Some" && isTagged(error.value, "LockLost") ? lostBy.renew : Effect.void
    }
  }
}
