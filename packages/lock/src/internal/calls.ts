// The lock client's calls, behind `Lock.make`: what every call of one client shares, and the steps of
// `withLock` and `tryWithLock` from the caller's arguments to `locked.ts` (validation, the key, the
// clock, the span and the key's in-process turn).
//
// Each call is one synchronous step before the key's turn: it validates, encodes and reads the clock
// there, since this runs on every call.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import type * as KeyCodec from "../KeyCodec.ts"
import type { Lease } from "../Lease.ts"
import type { Backend } from "../LockBackend.ts"
import { type LockError, type LockRedisError, TimedOut } from "../LockError.ts"
import * as AttemptSlots from "./attemptSlots.ts"
import { encodeKey } from "./encodeKey.ts"
import { grantingWaiterPrefix, ownChannelWaiterPrefix } from "./lua.ts"
import * as LocalQueue from "./localQueue.ts"
import * as Locked from "./locked.ts"
import * as Metrics from "./metrics.ts"
import * as Renewals from "./renewals.ts"
import { positiveMillisResult, type Settings } from "./settings.ts"
import { monotonicMillis, nowMillis } from "./time.ts"
import { newToken } from "./token.ts"
import { annotate, type CallTrace, traced } from "./tracing.ts"
import * as StaleGrants from "./staleGrants.ts"
import * as Transfer from "./transfer.ts"
import * as Warnings from "./warnings.ts"

/** What every call of one lock client shares; the renewal scheduler lives in the client's scope. */
export const makeShared = (backend: Backend, settings: Settings): Effect.Effect<Locked.Client, never, Scope.Scope> =>
  Effect.map(Renewals.make(backend, settings), (renewals) => ({
    backend,
    settings,
    renewals,
    queue: LocalQueue.make<Transfer.Grant>((key, grant) => Transfer.abandon(backend, settings, key, grant)),
    metrics: Metrics.make(settings.namespace),
    attemptSlots: AttemptSlots.make(),
    // Over a backend whose releases can hand the lock to a waiter, this client's waiters accept that;
    // otherwise they are woken on a channel of their own. Either way a release can tell whether the
    // waiter's process still listens.
    waiterId: `${backend.wakeups?.grants === true ? grantingWaiterPrefix : ownChannelWaiterPrefix}${newToken()}`,
    warnings: Warnings.make(settings.namespace),
    staleGrants: StaleGrants.make()
  }))

// What `runLocked` answers for a busy lock: `tryWithLock` reports it; `withLock` waits, so never sees it.
const busyOutcome: Effect.Effect<Option.Option<never>> = Effect.succeed(Option.none())
const waitingIsNeverBusy: Effect.Effect<never> = Effect.die(new Error("a waiting lock call found the lock busy"))

/**
 * Gave up behind another fiber of this client without a server attempt: its turn never came (busy),
 * or (`lastError`) that fiber's attempts are failing for want of a server (unavailable).
 */
const timedOutBehind = (
  shared: Locked.Client,
  key: string,
  startedAt: number,
  trace: CallTrace | undefined,
  lastError?: LockRedisError
): Effect.Effect<never, TimedOut> =>
  Effect.flatMap(nowMillis, (now) => {
    const reason = lastError === undefined ? "busy" : "unavailable"
    annotate(trace, { "lock.outcome": "timed_out", "lock.timed_out.reason": reason, "lock.busy.in_process": true })
    return Effect.andThen(
      shared.metrics.timedOutInProcess,
      new TimedOut({
        key,
        namespace: shared.settings.namespace,
        waitedMillis: Math.round(now - startedAt),
        attempts: 0,
        reason,
        ...(lastError === undefined ? {} : { lastError })
      })
    )
  })

/** `LockClient.withLock`: waits for the key's turn in this client, then for the lock at the server. */
export const withLock = <K, A, E, R>(
  shared: Locked.Client,
  codec: KeyCodec.KeyCodec<K>,
  key: K,
  waitTimeout: unknown,
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E | LockError, Exclude<R, Lease>> =>
  Effect.withFiber((fiber) => {
    const waitMillis = positiveMillisResult("waitTimeout", waitTimeout)
    if (Result.isFailure(waitMillis)) return Effect.fail(waitMillis.failure)
    const redisKey = encodeKey(codec, shared.settings.namespace, key)
    if (Result.isFailure(redisKey)) return Effect.fail(redisKey.failure)
    const clock = fiber.getRef(Clock.Clock)
    const startedAt = monotonicMillis(clock)
    const deadline = startedAt + waitMillis.success
    return traced(fiber, "Lock.withLock", redisKey.success, (trace, context) =>
      shared.queue.withTurn(
        redisKey.success,
        "wait",
        waitMillis.success,
        (waitedBehind, passTurn, grant, restore) =>
          Locked.runLocked(
            shared,
            {
              key: redisKey.success,
              startedAt,
              deadline,
              mode: "wait",
              waitedBehind,
              trace,
              passTurn,
              grant,
              clock,
              context
            },
            body,
            identity,
            waitingIsNeverBusy,
            restore
          ),
        // Another fiber of this client held or waited for the key the whole time.
        () => timedOutBehind(shared, redisKey.success, startedAt, trace)
      )
    )
  })

/** `LockClient.tryWithLock`: one attempt (temporary failures retried within `tryBudget` ms). */
export const tryWithLock = <K, A, E, R>(
  shared: Locked.Client,
  codec: KeyCodec.KeyCodec<K>,
  tryBudget: number,
  key: K,
  body: Effect.Effect<A, E, R>
): Effect.Effect<Option.Option<A>, E | LockError, Exclude<R, Lease>> =>
  Effect.withFiber((fiber) => {
    const redisKey = encodeKey(codec, shared.settings.namespace, key)
    if (Result.isFailure(redisKey)) return Effect.fail(redisKey.failure)
    const clock = fiber.getRef(Clock.Clock)
    const startedAt = monotonicMillis(clock)
    return traced(fiber, "Lock.tryWithLock", redisKey.success, (trace, context) =>
      shared.queue.withTurn(
        redisKey.success,
        "try",
        0,
        (_, passTurn, _grant, restore) =>
          Locked.runLocked(
            shared,
            {
              key: redisKey.success,
              startedAt,
              deadline: startedAt + tryBudget,
              mode: "try",
              waitedBehind: false,
              trace,
              passTurn,
              clock,
              context
            },
            body,
            Option.some,
            busyOutcome,
            restore
          ),
        // Another fiber of this client holds or waits for the key: busy, counted as such; unless
        // that fiber's attempts are failing for want of a server, which is no "busy".
        () => {
          const unavailable = shared.queue.unavailable(redisKey.success)
          if (unavailable !== undefined) return timedOutBehind(shared, redisKey.success, startedAt, trace, unavailable)
          annotate(trace, { "lock.outcome": "busy", "lock.busy.in_process": true })
          return Effect.as(shared.metrics.busyInProcess, Option.none())
        }
      )
    )
  })
