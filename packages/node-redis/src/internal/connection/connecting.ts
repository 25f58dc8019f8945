// A backend that a layer hands out while its connections are still being made.
//
// The lock's layer is built after the backend's (it needs the backend), so a backend layer that
// waited for its server would make a bad lock option wait for the server too, and report the
// connection's failure instead. The layers therefore check the backend's own options at once, start
// connecting in a fiber of the layer's scope, and provide this backend: the lock checks its options,
// then waits for `connected` and uses the backend it completes with. Closing the layer interrupts a
// connect still running, which closes what it opened.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { type Backend, type LeaseRequest, LockBackend } from "@sage/lock/LockBackend"
import { type InvalidArgument, LockRedisError } from "@sage/lock/LockError"

/** What a checked set of options connects: the connected backend, its connections in the scope. */
export type Connect = Effect.Effect<Backend, LockRedisError | InvalidArgument, Scope.Scope>

/** How an operation called before the connect completed reports a connect that failed for good. */
const notConnected = (command: string, error: LockRedisError | InvalidArgument): LockRedisError =>
  error._tag === "LockRedisError"
    ? error
    : new LockRedisError({
        command,
        kind: "connection",
        code: "NOT_CONNECTED",
        reply: error.message,
        retryable: false,
        mayHaveExecuted: false,
        cause: error
      })

const stillConnecting = (command: string, millis: number): LockRedisError =>
  new LockRedisError({
    command,
    kind: "timeout",
    code: "TIMEOUT",
    reply: `still connecting after ${millis} ms`,
    retryable: true,
    mayHaveExecuted: false
  })

/**
 * Starts `connect` in the current scope and returns at once a backend whose `connected` completes
 * with the connected backend (or `connect`'s failure). Its own operations wait for the connection
 * within their `timeoutMillis`, then run on it.
 */
export const backend = (description: string, connect: Connect): Effect.Effect<Backend, never, Scope.Scope> =>
  Effect.gen(function* () {
    const ready = Deferred.makeUnsafe<Backend, LockRedisError | InvalidArgument>()
    yield* Effect.forkScoped(
      Effect.onExit(connect, (exit) => Deferred.done(ready, exit)),
      { startImmediately: true }
    )
    const connected = Deferred.await(ready)
    // Waits for the connection within the request's limit, then runs the operation with what is left.
    const via = <A>(
      command: string,
      request: LeaseRequest,
      run: (backend: Backend, request: LeaseRequest) => Effect.Effect<A, LockRedisError>
    ): Effect.Effect<A, LockRedisError> =>
      Effect.suspend(() => {
        const startedAt = performance.now()
        return Effect.flatMap(
          Effect.mapError(Effect.timeoutOption(connected, request.timeoutMillis), (error) =>
            notConnected(command, error)
          ),
          (done) => {
            if (done._tag === "None") return Effect.fail(stillConnecting(command, request.timeoutMillis))
            const left = Math.max(1, Math.floor(request.timeoutMillis - (performance.now() - startedAt)))
            return run(done.value, { ...request, timeoutMillis: left })
          }
        )
      })
    return {
      description,
      connected,
      acquire: (request) => via("acquire", request, (backend, request) => backend.acquire(request)),
      renew: (request) => via("renew", request, (backend, request) => backend.renew(request)),
      release: (request) => via("release", request, (backend, request) => backend.release(request)),
      check: (request) => via("check", request, (backend, request) => backend.check(request))
    } satisfies Backend
  })

/**
 * The layer of checked options: it fails at once on a bad option, and otherwise provides the backend
 * while it connects (see `LockBackend.Backend.connected`): the lock's layer then checks its own
 * options before it waits for the connection, and fails with the connection's failure.
 */
export const layer = <E>(description: string, prepared: Effect.Effect<Connect, E>): Layer.Layer<LockBackend, E> =>
  Layer.effect(
    LockBackend,
    Effect.flatMap(prepared, (connect) => backend(description, connect))
  )
