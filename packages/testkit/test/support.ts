/**
 * Test helpers: scoped node-redis clients that are always destroyed and never crash the process on
 * socket errors, scoped environment variables, and a promise race for "did not answer in time".
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createClient } from "redis"

/** The client type `connect` returns. */
export type Client = ReturnType<typeof createClient>

/** A connected node-redis client (no reconnects, RESP2) destroyed when the scope closes. */
export const connect = (
  url: string,
  options?: { readonly name?: string }
): Effect.Effect<Client, unknown, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise(async () => {
      const client: Client = createClient({
        url,
        socket: { reconnectStrategy: false, connectTimeout: 2000 },
        disableClientInfo: true,
        ...(options?.name === undefined ? {} : { name: options.name })
      })
      client.on("error", () => {})
      try {
        await client.connect()
      } catch (error) {
        client.destroy()
        throw error
      }
      return client
    }),
    (client) => Effect.sync(() => client.destroy())
  )

/** Sets environment variables for the scope and restores the previous values afterwards. */
export const withEnv = (vars: Record<string, string | undefined>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const saved: Record<string, string | undefined> = {}
      for (const [name, value] of Object.entries(vars)) {
        saved[name] = process.env[name]
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
      return saved
    }),
    (saved) =>
      Effect.sync(() => {
        for (const [name, value] of Object.entries(saved)) {
          if (value === undefined) delete process.env[name]
          else process.env[name] = value
        }
      })
  ).pipe(Effect.asVoid)

/** Resolves with the promise's value, or with "no reply" if it has not settled within `ms`. */
export const within = <A>(promise: Promise<A>, ms: number): Effect.Effect<A | "no reply", unknown> =>
  Effect.tryPromise(() => {
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<"no reply">((resolve) => {
      timer = setTimeout(() => resolve("no reply"), ms)
    })
    return Promise.race([promise, late]).finally(() => clearTimeout(timer))
  })

/** Whether a pid still names a live process. */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Elapsed wall time of an effect in milliseconds, alongside its value. */
export const timed = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<readonly [number, A], E, R> =>
  Effect.gen(function* () {
    const start = performance.now()
    const value = yield* self
    return [performance.now() - start, value] as const
  })
