// Connecting one standalone client for the life of a scope: bounded by `connectTimeoutMillis`,
// interruptible, reconnecting with a short capped backoff once connected, socket errors logged once
// per outage and never thrown, and closed (then destroyed) with the scope.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { LockRedisError } from "@sage/lock/LockError"
import { createClient, type RedisClientOptions } from "redis"
import { classify } from "../connection/classify.ts"
import { defaultReconnect } from "../connection/clients.ts"
import { destroyForGood } from "../connection/teardown.ts"

type Client = ReturnType<typeof createClient>

export const connect = (
  clientOptions: RedisClientOptions,
  connectTimeoutMillis: number
): Effect.Effect<Client, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context()
    const log = (effect: Effect.Effect<void>) => Effect.runForkWith(context)(effect)
    const client: Client = createClient({
      ...clientOptions,
      socket: { reconnectStrategy: defaultReconnect, ...clientOptions.socket }
    } as RedisClientOptions) as Client
    // Until the first `ready`, a connection error fails the layer; afterwards errors are logged once
    // per outage (node-redis reports every failed reconnect attempt).
    let ready = false
    let reported = false
    let failFirst: ((error: unknown) => void) | undefined
    client.on("error", (error: unknown) => {
      if (!ready) return failFirst?.(error)
      if (reported) return
      reported = true
      log(Effect.logWarning("redis connection error; reconnecting", classify("connect", error)))
    })
    client.on("ready", () => {
      ready = true
      reported = false
    })
    const timeout = connectTimeoutMillis
    let timer: ReturnType<typeof setTimeout> | undefined
    let state: "connecting" | "connected" | "failed" = "connecting"
    // Registered before the connect, which then stays interruptible: a layer interrupted while it
    // connects ends at once instead of at `connectTimeoutMillis`, its client destroyed. A connected
    // client is closed, then destroyed; `close()` rejects on a client that is already closed
    // (destroyed after it went silent, or given up on by an application's `reconnectStrategy`): that
    // is no failure of the close. A failed connect destroyed its client already.
    yield* Effect.addFinalizer(() => {
      if (state === "failed") return Effect.void
      if (state === "connecting") {
        return Effect.sync(() => {
          clearTimeout(timer)
          destroyForGood(client)
        })
      }
      return Effect.promise(() =>
        Promise.resolve()
          .then(() => client.close())
          .catch(() => undefined)
      ).pipe(Effect.timeoutOption(2_000), Effect.ensuring(Effect.sync(() => destroyForGood(client))))
    })
    return yield* Effect.tryPromise({
      try: () =>
        new Promise<Client>((resolve, reject) => {
          failFirst = reject
          timer = setTimeout(() => reject(new Error(`could not connect within ${timeout} ms`)), timeout)
          client.connect().then(
            () => {
              clearTimeout(timer)
              state = "connected"
              resolve(client)
            },
            (error: unknown) => {
              clearTimeout(timer)
              reject(error)
            }
          )
        }),
      catch: (error) => {
        state = "failed"
        clearTimeout(timer)
        destroyForGood(client)
        return classify("connect", error)
      }
    })
  })
