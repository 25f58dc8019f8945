/**
 * Small helpers shared by the contract suite: unique namespaces, condition polling with deadlines,
 * and an interval recorder that proves bodies never overlap.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

/** A fresh namespace per test, so tests never share keys and need no FLUSHALL. */
export const uniqueNamespace = (label = "t"): string => `${label}-${randomUUID().slice(0, 8)}`

/** The Redis key the lock uses for a plain key without `%`, `{` or `}`. */
export const redisKey = (namespace: string, key: string): string => `${namespace}:{${key}}`

/** Wall time in milliseconds from Effect's clock (the suite runs on the live clock). */
export const now: Effect.Effect<number> = Clock.currentTimeMillis

/** Polls `condition` every 10 ms until it holds, failing the test after `timeoutMillis`. */
export const eventually = <E, R>(
  description: string,
  condition: Effect.Effect<boolean, E, R>,
  timeoutMillis = 5_000
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function* () {
    const start = yield* now
    while (!(yield* condition)) {
      if ((yield* now) - start > timeoutMillis) {
        return yield* Effect.fail(new Error(`timed out after ${timeoutMillis} ms waiting for: ${description}`))
      }
      yield* Effect.sleep(10)
    }
  })

/** Records when bodies enter and leave, and the highest number inside at once. */
export interface OverlapRecorder {
  readonly enter: Effect.Effect<void>
  readonly exit: Effect.Effect<void>
  readonly maxInside: () => number
  readonly completed: () => number
}

export const overlapRecorder = (): OverlapRecorder => {
  let inside = 0
  let max = 0
  let completed = 0
  return {
    enter: Effect.sync(() => {
      inside++
      max = Math.max(max, inside)
    }),
    exit: Effect.sync(() => {
      inside--
      completed++
    }),
    maxInside: () => max,
    completed: () => completed
  }
}
