// The standalone backend: one node-redis client whose shared, pipelined connection carries every
// lock operation (each is a single script, so none needs a dedicated connection). The client lives
// as long as the layer, reconnects with a short capped backoff, and never throws socket errors.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend } from "@sage/lock/LockBackend"
import type { RedisError } from "@sage/lock/LockError"
import { createClient, type RedisClientOptions } from "redis"
import { classify } from "./classify.ts"
import { parseAcquire, runScript, type Send } from "./commands.ts"
import * as Scripts from "./scripts.ts"

type Client = ReturnType<typeof createClient>

/** 20 ms doubling up to 500 ms, plus up to 50 ms of jitter: a lock cannot wait seconds to reconnect. */
export const defaultReconnect = (retries: number): number =>
  Math.min(20 * 2 ** retries, 500) + Math.floor(Math.random() * 50)

export const connect = (
  clientOptions: RedisClientOptions,
  connectTimeoutMillis: number
): Effect.Effect<Client, RedisError, Scope.Scope> =>
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
    return yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          new Promise<Client>((resolve, reject) => {
            failFirst = reject
            const timer = setTimeout(() => reject(new Error(`could not connect within ${timeout} ms`)), timeout)
            client.connect().then(
              () => {
                clearTimeout(timer)
                resolve(client)
              },
              (error: unknown) => {
                clearTimeout(timer)
                reject(error)
              }
            )
          }),
        catch: (error) => {
          client.destroy()
          return classify("connect", error)
        }
      }),
      (client) =>
        Effect.promise(() => client.close()).pipe(
          Effect.timeoutOption(2_000),
          Effect.ensuring(Effect.sync(() => client.isOpen && client.destroy())),
          Effect.ignore
        )
    )
  })

/** The backend over a connected standalone client: every operation is one script on the shared connection. */
export const fromClient = (client: Client, description: string): Backend => {
  const send: Send = (args, timeoutMillis) =>
    Effect.tryPromise({
      try: (signal) =>
        client.sendCommand([...args], { timeout: Math.max(1, Math.ceil(timeoutMillis)), abortSignal: signal }),
      catch: (error) => classify(args[0] ?? "command", error)
    })
  return {
    description,
    acquire: (request) =>
      Effect.flatMap(
        runScript(
          send,
          Scripts.acquire,
          request.key,
          [request.token, String(request.leaseMillis)],
          request.timeoutMillis
        ),
        parseAcquire
      ),
    renew: (request) =>
      Effect.map(
        runScript(
          send,
          Scripts.renew,
          request.key,
          [request.token, String(request.leaseMillis)],
          request.timeoutMillis
        ),
        (reply) => reply === 1
      ),
    release: (request) =>
      Effect.map(
        runScript(send, Scripts.release, request.key, [request.token], request.timeoutMillis),
        (reply) => reply === 1
      )
  }
}
