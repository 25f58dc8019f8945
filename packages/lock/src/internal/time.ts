// Monotonic milliseconds from Effect's Clock. Deadlines and lease validity are local durations, so
// they use the monotonic clock: a wall-clock step (NTP, an operator) cannot stretch or shrink them.
// Expiry itself is the server's business and is never computed from this clock. Whole milliseconds
// keep deadline arithmetic exact (no float drift that could wake a sleeper just past a deadline).
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export const nowMillis: Effect.Effect<number> = Clock.clockWith((clock) =>
  Effect.sync(() => Number(clock.monotonicTimeNanosUnsafe() / 1_000_000n))
)
