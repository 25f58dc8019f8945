// A connection that has gone silent: node-redis reports it ready, commands go out on it, and nothing
// comes back. That is what a middlebox that lost the connection's state does (a NAT or proxy
// timeout, a cloud load balancer after a failover), or a peer that vanished without a reset: TCP
// keeps retrying for up to about 15 minutes before it gives up, and until then every lock whose key
// hashes to that connection times out, while new connections to the same server would work.
//
// The connections the lock owns and keeps open are watched for it: the standalone layer's (`watch`
// replaces one) and the shared ones of the replicated pool (`pool.ts` closes one, and the next
// operation opens another; pooled connections are closed after any timeout anyway). Nothing is added
// to the reply path: when a command times out (`CommandClient.onNoReply`), the connection is asked a
// `PING`. If that `PING` is not answered within `silentAfterMillis` either, the connection is taken
// out of service; its commands still waiting fail, retryable. A server that is merely slow answers the
// `PING` in the end (a long script, `DEBUG SLEEP`, `CLIENT PAUSE`, `LOADING` replies), and a
// connection node-redis already knows to be broken is left to node-redis's own reconnect.
//
// Commands already written to the silent connection may still reach the server later than commands
// sent on its replacement (an acquire after its own cleanup release, say). Every lock script checks
// the caller's token, so this can only leave a key held until its lease ends, never break exclusion.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import type { LockRedisError } from "@sage/lock/LockError"
import type { SharedClient, SubscriberClient } from "./standalone.ts"

/**
 * How long a connection that node-redis reports ready may leave a `PING` unanswered, after one of
 * its commands timed out, before it is replaced. Longer than the server stalls the lock rides out
 * without losing a lease (a script or `DEBUG SLEEP` of a few seconds).
 */
export const silentAfterMillis = 5_000

/** What a probe needs of a connection: commands, and whether node-redis counts it as ready. */
export interface Probed {
  readonly isReady: boolean
  sendCommand(args: Array<string>, options?: { readonly timeout?: number }): Promise<unknown>
}

/**
 * An `onNoReply` for a connection: asks it a `PING` (one at a time, and only while node-redis counts
 * it as ready) and calls `onSilent` with how long it went unanswered when no answer, not even an
 * error, comes within `limitMillis`. `connection` returns the connection to probe now, or
 * `undefined` to skip.
 */
export const silenceProbe = (
  connection: () => Probed | undefined,
  onSilent: (silent: Probed, silentForMillis: number) => void,
  limitMillis: number = silentAfterMillis
): (() => void) => {
  let probing = false
  return () => {
    const probed = connection()
    if (probing || probed === undefined || !probed.isReady) return
    probing = true
    const started = Date.now()
    const timer = setTimeout(() => {
      probing = false
      onSilent(probed, Date.now() - started)
    }, limitMillis)
    const settle = (): void => {
      if (!probing) return
      probing = false
      clearTimeout(timer)
    }
    probed.sendCommand(["PING"], { timeout: 0 }).then(settle, settle)
  }
}

/** What the watcher needs of a node-redis client: commands, a duplicate, and its ready state. */
export interface WatchedClient extends SharedClient {
  readonly isReady: boolean
}

/** How to open a connection of the layer (scoped: it closes with its scope). */
export interface Options<C extends WatchedClient> {
  readonly open: Effect.Effect<C, LockRedisError, Scope.Scope>
  /** How long an unanswered `PING` marks the connection silent; `silentAfterMillis` by default. */
  readonly silentAfterMillis?: number | undefined
}

/**
 * Opens a connection with `open` and returns a `SharedClient` over it that replaces it when it goes
 * silent (see the module comment). Each connection closes with the scope, or when it is replaced.
 */
export const watch = <C extends WatchedClient>(
  options: Options<C>
): Effect.Effect<SharedClient, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const layerScope = yield* Scope.Scope
    const context = yield* Effect.context<never>()
    const limit = options.silentAfterMillis ?? silentAfterMillis
    // Each connection has a scope of its own, so that a replaced one closes at once.
    let currentScope = yield* Scope.fork(layerScope)
    let current: C = yield* Scope.provide(currentScope)(options.open)
    let closed = false
    // A replacement under way when the layer closes is not waited for: its new connection's scope is
    // a child of the layer's, so that connection is closed as soon as its connect settles.
    let replacing: Fiber.Fiber<void> | undefined
    yield* Scope.addFinalizer(
      layerScope,
      Effect.sync(() => {
        closed = true
      })
    )

    const replace = (silent: C, silentFor: number): Effect.Effect<void> =>
      Effect.gen(function* () {
        const scope = yield* Scope.fork(layerScope)
        const opened = yield* Effect.exit(Scope.provide(scope)(options.open))
        if (Exit.isFailure(opened) || closed || current !== silent) {
          yield* Scope.close(scope, Exit.void)
          if (Exit.isFailure(opened)) {
            yield* Effect.logWarning(
              `redis connection answered nothing for ${silentFor} ms; a new one could not be opened, keeping it`,
              opened.cause
            )
          }
          return
        }
        const retired = currentScope
        current = opened.value
        currentScope = scope
        yield* Effect.logWarning(
          `redis connection answered nothing for ${silentFor} ms while reported ready; replaced by a new one`
        )
        // Its commands still waiting fail (retryable) as it closes.
        yield* Scope.close(retired, Exit.void)
      })

    const probe = silenceProbe(
      () => (closed || replacing !== undefined ? undefined : current),
      (silent, silentFor) => {
        if (closed || replacing !== undefined) return
        replacing = Effect.runForkWith(context)(
          replace(silent as C, silentFor).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                replacing = undefined
              })
            )
          )
        )
      },
      limit
    )

    return {
      sendCommand: (args, commandOptions) => current.sendCommand(args, commandOptions),
      duplicate: (): SubscriberClient => current.duplicate(),
      onNoReply: probe
    }
  })
