// Connecting a node-redis topology client (Cluster or Sentinel) for the life of a scope: bounded
// connect, socket errors swallowed (they are classified where commands fail), close on release with
// a bounded wait and a hard destroy after it.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { LockRedisError } from "@sage/lock/LockError"
import { classify } from "./classify.ts"

/** The part of a node-redis client this needs. */
export interface Closeable {
  readonly on: (event: "error", listener: (error: unknown) => void) => unknown
  readonly connect: () => Promise<unknown>
  readonly close: () => Promise<unknown>
  readonly destroy: () => unknown
}

const quietly = (run: () => unknown): Effect.Effect<void> =>
  Effect.promise(() =>
    Promise.resolve()
      .then(run)
      .catch(() => {})
  ).pipe(Effect.asVoid)

export const connectScoped = <C extends Closeable>(
  name: string,
  create: () => C,
  timeoutMillis: number
): Effect.Effect<C, LockRedisError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const client = create()
      client.on("error", () => {})
      return Effect.tryPromise({
        try: () => client.connect(),
        catch: (error) => classify(`${name} connect`, error)
      }).pipe(
        Effect.timeoutOrElse({
          duration: timeoutMillis,
          orElse: () => Effect.fail(classify(`${name} connect`, new Error(`not connected within ${timeoutMillis} ms`)))
        }),
        Effect.tapError(() => quietly(() => client.destroy())),
        Effect.as(client)
      )
    }),
    (client) =>
      quietly(() => client.close()).pipe(Effect.timeoutOption(2_000), Effect.ensuring(quietly(() => client.destroy())))
  )
