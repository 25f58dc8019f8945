// The semaphore client's calls, behind `Semaphore.make`: validation of the permits and the limit,
// then a locked call (`locked.ts`) that asks for permits rather than a lock. Unlike a lock's callers,
// a semaphore's callers of one client do not queue for the key in the process: each one is its own
// contender in the server's line, under a waiter id of its own, since several of them may hold
// permits at once.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as KeyCodec from "../KeyCodec.ts"
import type { Lease } from "../Lease.ts"
import type { Permits } from "../LockBackend.ts"
import type { InvalidArgument, LockError } from "../LockError.ts"
import { encodeKey } from "./encodeKey.ts"
import * as Locked from "./locked.ts"
import { invalid, positiveMillisResult } from "./settings.ts"
import { monotonicMillis } from "./time.ts"
import { traced } from "./tracing.ts"
import type { WaiterIds } from "./waiterIds.ts"

/** What every call of one semaphore client shares: a lock client's and its waiter ids. */
export interface Client extends Locked.Client {
  readonly waiterIds: WaiterIds
}

/** The largest limit a semaphore takes: permits are counted in the server's 64-bit integers. */
export const maxLimit = 2 ** 31 - 1

/** Permits of one call: `permits` (default 1) of `limit`, both whole numbers, `permits <= limit`. */
export const permitsResult = (permits: unknown, limit: unknown): Result.Result<Permits, InvalidArgument> => {
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > maxLimit) {
    return Result.fail(invalid("limit", limit, `must be a whole number from 1 to ${maxLimit}`))
  }
  const count = permits ?? 1
  if (typeof count !== "number" || !Number.isInteger(count) || count < 1) {
    return Result.fail(invalid("permits", permits, "must be a whole number of at least 1"))
  }
  if (count > limit) {
    return Result.fail(
      invalid("permits", permits, `must not exceed the limit (${limit}): the call could never be served`)
    )
  }
  return Result.succeed({ count, limit })
}

const waitingIsNeverBusy: Effect.Effect<never> = Effect.die(new Error("a waiting semaphore call found it busy"))
const busyOutcome: Effect.Effect<Option.Option<never>> = Effect.succeed(Option.none())

/** `SemaphoreClient.withPermits`: waits in the server's line for the permits, then runs the body. */
export const withPermits = <K, A, E, R>(
  shared: Client,
  codec: KeyCodec.KeyCodec<K>,
  key: K,
  options: { readonly permits?: unknown; readonly limit?: unknown; readonly waitTimeout?: unknown } | undefined,
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E | LockError, Exclude<R, Lease>> =>
  Effect.withFiber((fiber) => {
    const permits = permitsResult(options?.permits, options?.limit)
    if (Result.isFailure(permits)) return Effect.fail(permits.failure)
    const waitMillis = positiveMillisResult("waitTimeout", options?.waitTimeout)
    if (Result.isFailure(waitMillis)) return Effect.fail(waitMillis.failure)
    const redisKey = encodeKey(codec, shared.settings.namespace, key)
    if (Result.isFailure(redisKey)) return Effect.fail(redisKey.failure)
    const clock = fiber.getRef(Clock.Clock)
    const startedAt = monotonicMillis(clock)
    return traced(fiber, "Semaphore.withPermits", redisKey.success, (trace, context) => {
      const waiterId = shared.waiterIds.take()
      return Effect.ensuring(
        Effect.uninterruptibleMask((restore) =>
          Locked.runLocked(
            shared,
            {
              key: redisKey.success,
              startedAt,
              deadline: startedAt + waitMillis.success,
              mode: "wait",
              waitedBehind: false,
              trace,
              clock,
              context,
              permits: permits.success,
              waiterId
            },
            body,
            identity,
            waitingIsNeverBusy,
            restore
          )
        ),
        Effect.sync(() => shared.waiterIds.give(waiterId))
      )
    })
  })

/** `SemaphoreClient.tryWithPermits`: one attempt (temporary failures retried within `tryBudget` ms). */
export const tryWithPermits = <K, A, E, R>(
  shared: Client,
  codec: KeyCodec.KeyCodec<K>,
  tryBudget: number,
  key: K,
  options: { readonly permits?: unknown; readonly limit?: unknown } | undefined,
  body: Effect.Effect<A, E, R>
): Effect.Effect<Option.Option<A>, E | LockError, Exclude<R, Lease>> =>
  Effect.withFiber((fiber) => {
    const permits = permitsResult(options?.permits, options?.limit)
    if (Result.isFailure(permits)) return Effect.fail(permits.failure)
    const redisKey = encodeKey(codec, shared.settings.namespace, key)
    if (Result.isFailure(redisKey)) return Effect.fail(redisKey.failure)
    const clock = fiber.getRef(Clock.Clock)
    const startedAt = monotonicMillis(clock)
    return traced(fiber, "Semaphore.tryWithPermits", redisKey.success, (trace, context) =>
      Effect.uninterruptibleMask((restore) =>
        Locked.runLocked(
          shared,
          {
            key: redisKey.success,
            startedAt,
            deadline: startedAt + tryBudget,
            mode: "try",
            waitedBehind: false,
            trace,
            clock,
            context,
            permits: permits.success
          },
          body,
          Option.some,
          busyOutcome,
          restore
        )
      )
    )
  })
