// Monotonic milliseconds from Effect's Clock. Deadlines and lease validity are local durations, so
// they use the monotonic clock: a wall-clock step (NTP, an operator) cannot stretch or shrink them.
// Expiry itself is the server's business and is never computed from this clock. Whole milliseconds
// keep deadline arithmetic exact (no float drift that could wake a sleeper just past a deadline).
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

/** The clock's monotonic time in whole milliseconds, read now. */
export const monotonicMillis = (clock: Clock.Clock): number => Number(clock.monotonicTimeNanosUnsafe() / 1_000_000n)

export const nowMillis: Effect.Effect<number> = Clock.clockWith((clock) => Effect.sync(() => monotonicMillis(clock)))

/**
 * Continues with the current monotonic time: one step where `Effect.flatMap(nowMillis, f)` takes
 * three (the lock reads the clock several times per call).
 */
export const withNow = <A, E, R>(f: (now: number) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => f(monotonicMillis(fiber.getRef(Clock.Clock))))
