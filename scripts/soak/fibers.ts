// Counts the Effect fibers of a program that are alive: Effect calls a `FiberRuntimeMetrics`
// service, when one is in the context, as each fiber starts and ends (every fiber forked below the
// point where it is provided inherits it). A fiber left waiting forever by the lock (a waiter never
// woken, a scheduler never stopped) shows as a count that does not come back down.
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"

export interface FiberCounter {
  /** Fibers started and not yet ended. */
  readonly live: () => number
  /** Runs `effect` (and every fiber it forks) counted. */
  readonly counted: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const make = (): FiberCounter => {
  let live = 0
  const service: Metric.FiberRuntimeMetricsService = {
    recordFiberStart: () => {
      live++
    },
    recordFiberEnd: () => {
      live--
    }
  }
  return {
    live: () => live,
    counted: (effect) => Effect.provideService(effect, Metric.FiberRuntimeMetrics, service)
  }
}
