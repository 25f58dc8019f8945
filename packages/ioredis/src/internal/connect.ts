// Opening one client for the life of a scope: connected within `connectTimeoutMillis` (the layer
// fails otherwise), reconnecting with a short capped backoff afterwards, connection errors logged
// once per outage and never thrown, and closed with the scope.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Redis, type RedisOptions } from "ioredis"
import type { LockRedisError } from "@sage/lock/LockError"
import { reconnectDelay } from "@sage/lock-node-redis/CommandBackend"
import { classify } from "./classify.ts"
import { close } from "./close.ts"

export const connect = (
  options: RedisOptions,
  connectTimeoutMillis: number
): Effect.Effect<Redis, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context()
    // The lock's commands go out through `corkedSend`, which writes each tick's commands together.
    // No ready check: it asks INFO, which a least-privilege lock user may not run (ioredis then logs a
    // warning on every connect), and a server still loading answers LOADING, which the lock retries.
    const client = new Redis({
      retryStrategy: reconnectDelay,
      enableReadyCheck: false,
      ...options,
      lazyConnect: true
    })
    let ready = false
    let reported = false
    // ioredis rejects a first connect that failed with "Connection is closed."; the socket's own
    // error (ECONNREFUSED, ...) says what happened, and that it is worth retrying.
    let connectError: unknown
    client.on("error", (error: unknown) => {
      if (!ready) {
        connectError = error
        return
      }
      if (reported) return
      reported = true
      Effect.runForkWith(context)(Effect.logWarning("redis connection error; reconnecting", classify("connect", error)))
    })
    client.on("ready", () => {
      ready = true
      reported = false
    })
    yield* Effect.addFinalizer(() => close(client))
    return yield* connectWithin(client, () => connectError, connectTimeoutMillis, "could not connect")
  })

/**
 * Connects a client of the lock's own within `connectTimeoutMillis`: a failure is classified from the
 * socket's own error (`lastError`) when there is one, since ioredis rejects a failed connect with
 * "Connection is closed."; on any failure the client is disconnected.
 */
export const connectWithin = <C extends { connect(): Promise<unknown>; disconnect(): void }>(
  client: C,
  lastError: () => unknown,
  connectTimeoutMillis: number,
  what: string
): Effect.Effect<C, LockRedisError> =>
  Effect.tryPromise({
    try: () => client.connect(),
    catch: (error) => classify("connect", lastError() ?? error)
  }).pipe(
    Effect.timeoutOrElse({
      duration: connectTimeoutMillis,
      orElse: () =>
        Effect.fail(
          classify(
            "connect",
            Object.assign(new Error(`${what} within ${connectTimeoutMillis} ms`, { cause: lastError() }), {
              code: "ETIMEDOUT"
            })
          )
        )
    }),
    Effect.tapError(() => Effect.sync(() => client.disconnect())),
    Effect.as(client)
  )
