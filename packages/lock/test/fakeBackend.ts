// A scripted backend that drives rare timing branches under TestClock (hung replies, slow grants,
// failing renewals). It is never evidence that the lock works against a server: the contract suite
// in @sage/lock-testkit, run on real Redis and Valkey, is.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  type AcquireReply,
  type Backend,
  type Granted,
  type LeaseRequest,
  LockBackend,
  type RenewReply
} from "../src/LockBackend.ts"
import { LockRedisError } from "../src/LockError.ts"

export interface Calls {
  readonly acquire: Array<LeaseRequest>
  readonly renew: Array<LeaseRequest>
  readonly release: Array<LeaseRequest>
  /** Each batched renewal, as the list of its requests. */
  readonly renewAll: Array<ReadonlyArray<LeaseRequest>>
  /** The waiter id of each wait for a turn. */
  readonly waiterIds: Array<string>
}

/** A backend keeps its own time limit (the `LockBackend` contract): a hung reply becomes a timeout. */
const within = <A>(request: LeaseRequest, effect: Effect.Effect<A, LockRedisError>): Effect.Effect<A, LockRedisError> =>
  Effect.timeoutOrElse(effect, {
    duration: request.timeoutMillis,
    orElse: () =>
      Effect.fail(
        new LockRedisError({
          command: "test",
          kind: "timeout",
          code: "TIMEOUT",
          reply: `no reply within ${request.timeoutMillis} ms`,
          retryable: true,
          mayHaveExecuted: true
        })
      )
  })

export const scripted = (
  handlers: Partial<{
    acquire: (request: LeaseRequest, attempt: number) => Effect.Effect<AcquireReply, LockRedisError>
    renew: (request: LeaseRequest, attempt: number) => Effect.Effect<boolean, LockRedisError>
    release: (request: LeaseRequest) => Effect.Effect<boolean, LockRedisError>
    check: (request: LeaseRequest) => Effect.Effect<boolean, LockRedisError>
    renewAll: (requests: ReadonlyArray<LeaseRequest>) => Effect.Effect<ReadonlyArray<RenewReply>>
    /** Leaving the waiter queue; with it the backend has wake-ups (waiters just sleep their delay). */
    leave: (key: string, waiterId: string, timeoutMillis: number) => Effect.Effect<void>
    /** A waiter's wait for its turn (with `leave`); by default it sleeps its delay. */
    await: (key: string, waiterId: string, millis: number, call: number) => Effect.Effect<boolean | Granted>
    /** Whether releases hand the lock to waiters (`Wakeups.grants`). */
    grants: boolean
  }>
): { readonly layer: Layer.Layer<LockBackend>; readonly calls: Calls } => {
  const calls: Calls = { acquire: [], renew: [], release: [], renewAll: [], waiterIds: [] }
  const backend: Backend = {
    description: "scripted",
    acquire: (request) =>
      Effect.suspend(() => {
        calls.acquire.push(request)
        return within(
          request,
          handlers.acquire?.(request, calls.acquire.length) ?? Effect.succeed({ _tag: "Acquired", fence: 1 })
        )
      }),
    renew: (request) =>
      Effect.suspend(() => {
        calls.renew.push(request)
        return within(request, handlers.renew?.(request, calls.renew.length) ?? Effect.succeed(true))
      }),
    release: (request) =>
      Effect.suspend(() => {
        calls.release.push(request)
        return within(request, handlers.release?.(request) ?? Effect.succeed(true))
      }),
    check: (request) => within(request, handlers.check?.(request) ?? Effect.succeed(true)),
    ...(handlers.leave === undefined
      ? {}
      : {
          wakeups: {
            await: (key: string, waiterId: string, millis: number) =>
              Effect.suspend(() => {
                calls.waiterIds.push(waiterId)
                return (
                  handlers.await?.(key, waiterId, millis, calls.waiterIds.length) ??
                  Effect.as(Effect.sleep(millis), false)
                )
              }),
            leave: handlers.leave,
            grants: handlers.grants === true
          }
        }),
    ...(handlers.renewAll === undefined
      ? {}
      : {
          renewAll: (requests: ReadonlyArray<LeaseRequest>) =>
            Effect.suspend(() => {
              calls.renewAll.push(requests)
              return handlers.renewAll!(requests)
            })
        })
  }
  return { layer: Layer.succeed(LockBackend, backend), calls }
}

export const temporary = (code = "LOADING"): LockRedisError =>
  new LockRedisError({
    command: "test",
    kind: "server",
    code,
    reply: `${code} test`,
    retryable: true,
    mayHaveExecuted: false
  })

export const busy: Effect.Effect<AcquireReply> = Effect.succeed({ _tag: "Busy", remainingMillis: 10_000 })
