// Spans of lock calls, made only when someone can see them.
//
// `Effect.withSpan` costs about 4.5 us per call even with Effect's default in-memory tracer, which
// exports nothing: the parent-span and stack-frame context updates rebuild the fiber's context
// cache on the way in and out. That is more than all the rest of a lock call's own work, so when the
// fiber's tracer is still the native one (no tracing backend installed) or tracing is disabled, the
// call runs without a span (Effect documents comparing against `nativeTracer` for this). Once an
// application installs a tracer (OpenTelemetry, a test tracer), every call gets its span. Spans
// capture no call-site stack: that would cost a stack trace per call.
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"

const noStackTrace = { captureStackTrace: false } as const

/** Whether a tracing backend would see spans made on this fiber. */
export const isTraced = (fiber: Fiber.Fiber<unknown, unknown>): boolean =>
  fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer && fiber.getRef(References.TracerEnabled)

/** Runs `effect` in the span `name` (with the lock key as attribute) when a tracing backend is installed. */
export const traced = <A, E, R>(
  fiber: Fiber.Fiber<unknown, unknown>,
  effect: Effect.Effect<A, E, R>,
  name: string,
  key: string
): Effect.Effect<A, E, R> =>
  isTraced(fiber) ? effect.pipe(Effect.withSpan(name, { attributes: { "lock.key": key } }, noStackTrace)) : effect
