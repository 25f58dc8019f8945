// Connecting a node-redis topology client (Cluster) for the life of a scope: a bounded, interruptible
// connect, socket errors kept only to say why a connect failed (they are classified where commands
// fail), close on release with a bounded wait and a bounded hard destroy after it.
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

/** Runs a client's close or destroy, ignoring its failure, and waits at most 2 s for it to settle. */
const quietly = (run: () => unknown): Effect.Effect<void> =>
  Effect.promise(() =>
    Promise.resolve()
      .then(run)
      .catch(() => {})
  ).pipe(Effect.timeoutOption(2_000), Effect.asVoid)

/**
 * node-redis's Cluster client ends a discovery in which no root node answered with this error
 * alone, after reporting each node's own failure (a refused connection, `WRONGPASS`, a node that is
 * not a cluster) as an `error` event.
 */
const isRootNodesUnavailable = (error: unknown): boolean =>
  error instanceof Error && error.message.startsWith("All the root nodes are unavailable")

export const connectScoped = <C extends Closeable>(
  name: string,
  create: () => C,
  timeoutMillis: number
): Effect.Effect<C, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    let lastError: unknown
    // Only making the client is the acquisition: the connect after it stays interruptible, and
    // whatever its outcome the scope closes, then destroys, the client, each bounded.
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = create()
        client.on("error", (error) => {
          lastError = error
        })
        return client
      }),
      (client) =>
        Effect.andThen(
          quietly(() => client.close()),
          quietly(() => client.destroy())
        )
    )
    yield* Effect.tryPromise({
      try: () => client.connect(),
      // The failure that says why, rather than "All the root nodes are unavailable".
      catch: (error) =>
        classify(`${name} connect`, isRootNodesUnavailable(error) && lastError !== undefined ? lastError : error)
    }).pipe(
      Effect.timeoutOrElse({
        duration: timeoutMillis,
        orElse: () => Effect.fail(classify(`${name} connect`, new Error(`not connected within ${timeoutMillis} ms`)))
      }),
      // A failed connect is destroyed at once: a close would wait on the connect it abandons.
      Effect.tapError(() => quietly(() => client.destroy()))
    )
    return client
  })
