// Spans and span events of lock calls, made only when someone can see them.
//
// `Effect.withSpan` costs about 4.5 us per call even with Effect's default in-memory tracer, which
// exports nothing: the parent-span and stack-frame context updates rebuild the fiber's context
// cache on the way in and out. That is more than all the rest of a lock call's own work, so when the
// fiber's tracer is still the native one (no tracing backend installed) or tracing is disabled, the
// call runs without a span (Effect documents comparing against `nativeTracer` for this) and every
// event below is a no-op. Once an application installs a tracer (OpenTelemetry, a test tracer),
// each call gets its span, and the attempts, waits, renewals, loss and release are recorded on it as
// events. Spans capture no call-site stack: that would cost a stack trace per call.
import * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as References from "effect/References"
import * as Tracer from "effect/Tracer"

/** The span of one traced lock call, and the clock its events are stamped with. */
export interface CallTrace {
  readonly span: Tracer.Span
  readonly clock: Clock.Clock
}

const noStackTrace = { captureStackTrace: false } as const

/** Whether a tracing backend would see spans made on this fiber. */
export const isTraced = (fiber: Fiber.Fiber<unknown, unknown>): boolean =>
  fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer && fiber.getRef(References.TracerEnabled)

/**
 * Runs a lock call in the span `name` (with the lock key as `lock.key`) when a tracing backend is
 * installed; `run` gets the span to record events on, or `undefined` when the call is not traced,
 * and the context the call runs in (the span's, when traced: the body runs as its child).
 */
export const traced = <A, E, R>(
  fiber: Fiber.Fiber<unknown, unknown>,
  name: string,
  key: string,
  run: (trace: CallTrace | undefined, context: Context.Context<never>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  if (!isTraced(fiber)) return run(undefined, fiber.context)
  const clock = fiber.getRef(Clock.Clock)
  return Effect.useSpan(name, { attributes: { "lock.key": key } }, (span) =>
    Effect.withParentSpan(
      Effect.withFiber((inSpan) => run({ span, clock }, inSpan.context)),
      span,
      noStackTrace
    )
  )
}

/** Records an event on the call's span, if the call is traced. */
export const event = (trace: CallTrace | undefined, name: string, attributes: Record<string, unknown>): void => {
  if (trace !== undefined) trace.span.event(name, trace.clock.currentTimeNanosUnsafe(), attributes)
}

/** Sets attributes on the call's span, if the call is traced. */
export const annotate = (trace: CallTrace | undefined, attributes: Record<string, unknown>): void => {
  if (trace === undefined) return
  for (const key in attributes) trace.span.attribute(key, attributes[key])
}
