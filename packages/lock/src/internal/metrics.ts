// Recording the LockMetrics of one lock client (and a semaphore client's permits gauge,
// SemaphoreMetrics). The attribute sets are fixed per client (namespace,
// outcome, phase), so the series are made once, when the client is made. Updates on the
// hot path are plain function calls against the fiber's context (`Metric.updateUnsafe`), made from
// a step the lock call runs anyway, with no Effect built per update.
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as LockMetrics from "../LockMetrics.ts"
import * as SemaphoreMetrics from "../SemaphoreMetrics.ts"
import type { AcquireOutcome } from "./acquisition.ts"

export type Phase = "acquire" | "renew" | "release"

/** The fiber context metrics are recorded against (its metric registry). */
type Ctx = Context.Context<never>

export interface ClientMetrics {
  /** Counts a `LockLost` seen by a caller, by phase. */
  readonly lost: (phase: Phase) => Effect.Effect<void>
  /** Records the outcome of an acquisition that started at `start` (monotonic ms) and ended at `end`. */
  readonly acquisition: (context: Ctx, exit: Exit.Exit<AcquireOutcome, unknown>, start: number, end: number) => void
  /** Records an acquisition that got the lock: `acquisition` for a `Held` outcome. */
  readonly acquired: (context: Ctx, start: number, end: number) => void
  /** Counts a `LockLost` that renewal raised while the body ran. */
  readonly run: (context: Ctx, exit: Exit.Exit<unknown, unknown>) => void
  /** Adds `delta` to the permits its bodies hold (a semaphore call's body starting or ending). */
  readonly permitsHeld: (context: Ctx, delta: number) => void
  /** A `tryWithLock` that found another fiber of its client holding or waiting for the key. */
  readonly busyInProcess: Effect.Effect<void>
  /**
   * A `withLock` that timed out waiting behind another fiber of its client, or a `tryWithLock` that
   * found that fiber retrying an unreachable server (no server attempt either way).
   */
  readonly timedOutInProcess: Effect.Effect<void>
}

const isTagged = (error: unknown, tag: string): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === tag

/**
 * One series of `metric`: its updates carry `attributes` besides the fiber's own metric attributes,
 * as `Metric.withAttributes` would, with the attributed context made once per fiber context
 * (`withAttributes` makes it on every update: about 150 bytes and a context lookup, twice a call).
 * `how` is `update` (a counter's increment, a histogram's sample) or `modify` (a gauge's change).
 */
const series = <In>(
  metric: Metric.Metric<In, unknown>,
  attributes: Readonly<Record<string, string>>,
  how: "update" | "modify" = "update"
) => {
  const attributed = new WeakMap<Ctx, Ctx>()
  return (value: In, context: Ctx): void => {
    let withAttributes = attributed.get(context)
    if (withAttributes === undefined) {
      const own = Context.get(context, Metric.CurrentMetricAttributes)
      withAttributes = Context.add(context, Metric.CurrentMetricAttributes, { ...own, ...attributes })
      attributed.set(context, withAttributes)
    }
    if (how === "update") metric.updateUnsafe(value, withAttributes)
    else metric.modifyUnsafe(value, withAttributes)
  }
}

const counting = (metric: Metric.Metric<number, unknown>, attributes: Readonly<Record<string, string>>) => {
  const add = series(metric, attributes)
  const update = (context: Ctx): void => add(1, context)
  return { update, effect: Effect.withFiber<void>((fiber) => Effect.sync(() => update(fiber.context))) }
}

export const make = (namespace: string): ClientMetrics => {
  const outcome = (name: string) => counting(LockMetrics.acquisitions, { namespace, outcome: name })
  const acquired = outcome("acquired")
  const busy = outcome("busy")
  const timedOut = outcome("timed_out")
  const lostOutcome = outcome("lost")
  const failed = outcome("error")
  const waitTime = series(LockMetrics.waitTime, { namespace })
  const lostBy: Record<Phase, ReturnType<typeof counting>> = {
    acquire: counting(LockMetrics.lost, { namespace, phase: "acquire" }),
    renew: counting(LockMetrics.lost, { namespace, phase: "renew" }),
    release: counting(LockMetrics.lost, { namespace, phase: "release" })
  }
  const permitsHeldSeries = series(SemaphoreMetrics.permitsHeld, { namespace }, "modify")
  const held = (context: Ctx, start: number, end: number): void => {
    acquired.update(context)
    waitTime((end - start) / 1000, context)
  }
  return {
    permitsHeld: (context, delta) => permitsHeldSeries(delta, context),
    lost: (phase) => lostBy[phase].effect,
    acquired: held,
    acquisition: (context, exit, start, end) => {
      if (Exit.isSuccess(exit)) {
        if (exit.value._tag === "Busy") return busy.update(context)
        return held(context, start, end)
      }
      const error = Cause.findErrorOption(exit.cause)
      if (error._tag === "None") return
      if (isTagged(error.value, "TimedOut")) return timedOut.update(context)
      if (isTagged(error.value, "LockLost")) {
        lostOutcome.update(context)
        return lostBy.acquire.update(context)
      }
      failed.update(context)
    },
    busyInProcess: busy.effect,
    timedOutInProcess: timedOut.effect,
    run: (context, exit) => {
      if (Exit.isSuccess(exit)) return
      const error = Cause.findErrorOption(exit.cause)
      if (error._tag === "Some" && isTagged(error.value, "LockLost")) lostBy.renew.update(context)
    }
  }
}
