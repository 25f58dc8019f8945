// A connection of the lock's own that has gone silent: ioredis reports it ready, commands go out on
// it, and nothing comes back (a NAT or proxy that lost the connection's state, a peer gone without a
// reset). TCP keeps retrying for up to about 15 minutes, and until then every lock whose key maps to
// that connection times out, while a new connection to the same server would work.
//
// When a command on it gets no reply in time (`Connection.onNoReply`), the connection is asked `TIME`;
// if that is not answered within `silentAfterMillis` either, a new connection is opened, the silent one
// is closed at the server through it (`CLIENT KILL ID <id> ADDR <addr>`), and only then does the new
// one carry lock commands. The order matters: a waiter's `leave` that a buffering middlebox delivered
// late could otherwise free a key that a later grant gave to another fiber of the same client. The
// silent connection's id and address are asked whenever it becomes ready (`CLIENT INFO`, `CLIENT ID`
// for a user without `client|info`); without either, or without `client|kill`, it is kept, as if
// nothing watched it. Its commands still waiting then fail as retryable disconnections, and a retry
// goes to the new connection. The node-redis backend does the same for its connections.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { Redis } from "ioredis"
import type * as CommandBackend from "@sage/lock-node-redis/CommandBackend"
import type { LockRedisError } from "@sage/lock/LockError"
import { Replaced } from "./classify.ts"

/**
 * How long a connection that ioredis reports ready may leave a `TIME` unanswered, after one of its
 * commands timed out, before it is replaced: longer than the stalls a lock rides out without losing
 * a lease (a script or `DEBUG SLEEP` of a few seconds).
 */
export const silentAfterMillis = 5_000

/** How long the `CLIENT KILL` that fences a silent connection off may take. */
const fenceTimeoutMillis = 2_000

/** A connection as the server knows it. */
interface ServerSide {
  readonly id: number
  readonly addr: string | undefined
}

/** Reads `CLIENT INFO`'s one line (`id=7 addr=127.0.0.1:50000 ...`). */
const serverSideOf = (reply: unknown): ServerSide | undefined => {
  const text = typeof reply === "string" ? reply : Buffer.isBuffer(reply) ? reply.toString() : undefined
  if (text === undefined) return undefined
  const id = /(?:^|\s)id=(\d+)(?:\s|$)/.exec(text)?.[1]
  if (id === undefined) return undefined
  return { id: Number(id), addr: /(?:^|\s)addr=(\S+)/.exec(text)?.[1] }
}

const killArgs = (side: ServerSide): Array<string> =>
  side.addr === undefined ? ["KILL", "ID", String(side.id)] : ["KILL", "ID", String(side.id), "ADDR", side.addr]

/** What `within` rejects with when nothing, not even an error, came back in time. */
class NoReply extends Error {}

/** A promise that settles with `promise`, or rejects with `NoReply` after `millis`; its timer never holds the process. */
const within = <A>(promise: Promise<A>, millis: number): Promise<A> =>
  new Promise<A>((resolve, reject) => {
    const timer = setTimeout(() => reject(new NoReply(`no reply within ${millis} ms`)), millis)
    timer.unref()
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      }
    )
  })

/** Who each client's current connection is at the server; forgotten when it reconnects. */
const trackSides = () => {
  const sides = new WeakMap<Redis, ServerSide>()
  const generations = new WeakMap<Redis, number>()
  const ask = (client: Redis): void => {
    const asked = (generations.get(client) ?? 0) + 1
    generations.set(client, asked)
    const current = () => generations.get(client) === asked
    client.call("CLIENT", "INFO").then(
      (reply) => {
        const side = serverSideOf(reply)
        if (side !== undefined && current()) sides.set(client, side)
      },
      () =>
        client.call("CLIENT", "ID").then(
          (reply) => {
            if (typeof reply === "number" && current()) sides.set(client, { id: reply, addr: undefined })
          },
          () => {}
        )
    )
  }
  return {
    of: (client: Redis) => sides.get(client),
    track: (client: Redis) => {
      const forget = () => {
        sides.delete(client)
        generations.set(client, (generations.get(client) ?? 0) + 1)
      }
      client.on("close", forget)
      client.on("ready", () => ask(client))
      if (client.status === "ready") ask(client)
    }
  }
}

/** A watched connection: the lock's `Connection`, and the client in service now. */
export interface Watched extends CommandBackend.Connection {
  readonly current: () => Redis
}

/**
 * Opens a client with `open` and returns a connection over it that replaces it when it goes silent
 * (see the module comment). Each client closes with the scope, or when it is replaced.
 */
export const watch = (
  open: Effect.Effect<Redis, LockRedisError, Scope.Scope>
): Effect.Effect<Watched, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const layerScope = yield* Scope.Scope
    const context = yield* Effect.context<never>()
    const sides = trackSides()
    let currentScope = yield* Scope.fork(layerScope)
    let current = yield* Scope.provide(currentScope)(open)
    sides.track(current)
    const retired = new WeakSet<Redis>()
    let closed = false
    let busy = false
    yield* Scope.addFinalizer(
      layerScope,
      Effect.sync(() => {
        closed = true
      })
    )

    const replace = (silent: Redis, silentFor: number): Effect.Effect<void> =>
      Effect.gen(function* () {
        const side = sides.of(silent)
        if (side === undefined) {
          return yield* Effect.logWarning(
            `redis connection answered nothing for ${silentFor} ms while reported ready; it is kept: its id at the server is unknown (the user may lack client|info and client|id), so it cannot be closed at the server first`
          )
        }
        const scope = yield* Scope.fork(layerScope)
        const opened = yield* Effect.exit(Scope.provide(scope)(open))
        if (Exit.isFailure(opened)) {
          yield* Scope.close(scope, Exit.void)
          return yield* Effect.logWarning(
            `redis connection answered nothing for ${silentFor} ms; a new one could not be opened, keeping it`,
            opened.cause
          )
        }
        const fresh = opened.value
        // Nothing the silent connection still delivers may run after the new one's commands.
        const fenced = yield* Effect.exit(
          Effect.tryPromise(() => within(fresh.call("CLIENT", ...killArgs(side)), fenceTimeoutMillis))
        )
        if (Exit.isFailure(fenced) || closed || current !== silent) {
          yield* Scope.close(scope, Exit.void)
          if (Exit.isFailure(fenced)) {
            yield* Effect.logWarning(
              `redis connection answered nothing for ${silentFor} ms; it is kept: it could not be closed at the server first (the user may lack client|kill)`,
              fenced.cause
            )
          }
          return
        }
        const retiredScope = currentScope
        retired.add(silent)
        current = fresh
        currentScope = scope
        sides.track(fresh)
        yield* Effect.logWarning(
          `redis connection answered nothing for ${silentFor} ms while reported ready; ${
            fenced.value === 0 ? "the server had already dropped it" : "closed at the server"
          }, and replaced by a new one`
        )
        // Its commands still waiting fail at once (retryable): a graceful close would wait on a
        // connection that answers nothing.
        silent.disconnect()
        yield* Scope.close(retiredScope, Exit.void)
      })

    const onNoReply = (): void => {
      const probed = current
      if (busy || closed || probed.status !== "ready") return
      busy = true
      const started = performance.now()
      // Any answer, an error too, shows the connection is alive.
      within(probed.call("TIME"), silentAfterMillis).then(
        () => {
          busy = false
        },
        (error: unknown) => {
          if (!(error instanceof NoReply) || closed || current !== probed) {
            busy = false
            return
          }
          const silentFor = Math.round(performance.now() - started)
          Effect.runForkWith(context)(
            replace(probed, silentFor).pipe(
              Effect.ensuring(
                Effect.sync(() => {
                  busy = false
                })
              )
            )
          )
        }
      )
    }

    return {
      send: (args) => {
        const client = current
        return client.call(args[0]!, ...args.slice(1)).catch((error: unknown) => {
          throw retired.has(client) ? new Replaced(error) : error
        })
      },
      onNoReply,
      current: () => current
    }
  })
