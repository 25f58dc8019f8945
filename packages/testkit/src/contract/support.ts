/**
 * Small helpers shared by the contract suite: unique namespaces, condition polling with deadlines,
 * and an interval recorder that proves bodies never overlap.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"

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

/**
 * Forks `run(inside)` and returns its fiber once `inside` has run: put `inside` at the start of a
 * lock's body, and the fiber is returned while the body holds the lock.
 */
export const forkUntilInside = <A, E, R>(
  run: (inside: Effect.Effect<void>) => Effect.Effect<A, E, R>
): Effect.Effect<Fiber.Fiber<A, E>, never, R> =>
  Effect.gen(function* () {
    const started = yield* Deferred.make<void>()
    const fiber = yield* Effect.forkChild(run(Effect.asVoid(Deferred.succeed(started, undefined))))
    yield* Deferred.await(started)
    return fiber
  })

/**
 * How much of the deployment under test the suite can reach besides the backend:
 * - `"server"`: raw commands and pausing the server (`ServerControl` in full); every test runs;
 * - `"keys"`: reading and writing keys by name (`get`, `set`, `del`, `pttl`), as an in-memory
 *   backend's key view allows; tests that send raw commands or pause the server are left out;
 * - `"backend"`: the backend alone; only the tests that need nothing else run.
 *
 * @category models
 * @since 0.2.1
 */
export type Reach = "server" | "keys" | "backend"

const depth: Record<Reach, number> = { backend: 0, keys: 1, server: 2 }

/** Registers nothing: the registrar for tests a deployment cannot reach. */
const registersNothing: unknown = new Proxy(() => {}, { get: () => registersNothing, apply: () => undefined })

/**
 * `it` for tests that need `needs`, when the suite reaches that far; otherwise a registrar that
 * registers nothing, so that those tests are not part of the run at all (never reported skipped).
 */
export const reaching = <It>(it: It, reach: Reach, needs: Reach): It =>
  depth[reach] >= depth[needs] ? it : (registersNothing as It)
