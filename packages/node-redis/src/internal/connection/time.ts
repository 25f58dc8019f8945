// Monotonic milliseconds from Effect's Clock, for budgets measured inside one operation. The wall
// clock can be stepped (NTP, an operator) between two reads and would make a budget look spent, or
// never spent; the monotonic clock only moves forward at the rate time passes. The lock's core
// measures its deadlines the same way.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export const monotonicMillis: Effect.Effect<number> = Clock.clockWith((clock) =>
  Effect.sync(() => Number(clock.monotonicTimeNanosUnsafe() / 1_000_000n))
)
