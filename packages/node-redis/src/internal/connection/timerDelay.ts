// Node keeps a timer's delay in a 32-bit signed integer. A longer delay (more than about 24.8 days)
// is not an error: Node prints a TimeoutOverflowWarning and fires the timer after 1 ms. A command's
// time limit comes from the lock's lease or a caller's `timeoutMillis`, both of which may be longer,
// so every timer of the backend takes its delay through `timerDelay`.

/** The longest delay a Node timer keeps: 2^31 - 1 ms, about 24.8 days. */
export const maxTimerMillis = 2 ** 31 - 1

/** `millis` as a delay Node's timers honour: whole, at least 1 ms, at most `maxTimerMillis`. */
export const timerDelay = (millis: number): number => Math.min(maxTimerMillis, Math.max(1, Math.ceil(millis)))
