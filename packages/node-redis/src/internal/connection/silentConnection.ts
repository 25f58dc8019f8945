// A connection that has gone silent: node-redis reports it ready, commands go out on it, and nothing
// comes back. That is what a middlebox that lost the connection's state does (a NAT or proxy
// timeout, a cloud load balancer after a failover), or a peer that vanished without a reset: TCP
// keeps retrying for up to about 15 minutes before it gives up, and until then every lock whose key
// maps to that connection times out, while new connections to the same server would work.
//
// The connections the lock owns and keeps open are watched for it: the standalone layer's (`watch`
// replaces one) and the shared ones of the replicated pool (`pool/sharedLanes.ts` closes one, and
// the next operation opens another; pooled connections are closed after any timeout anyway), and
// the wake-up subscriber connections the lock opens itself (`wakeups/silence.ts` replaces one,
// asking `PING` when a wait ran out without a message; a subscriber writes nothing, so it needs no
// fence). Nothing is added to the reply path: when a command times out (`CommandClient.onNoReply`),
// the connection is asked `TIME`. If that is not answered within `silentAfterMillis` either, the
// connection is taken out of service; its commands still waiting fail, retryable. A server that is
// merely slow answers in the end (a long script, `DEBUG SLEEP`, `CLIENT PAUSE`, `LOADING` replies),
// and a connection node-redis already knows to be broken is left to node-redis's own reconnect.
//
// Order. A lock's commands stay on one connection so that they run in the order sent. Commands a
// silent connection holds could still reach the server later (a middlebox that buffered them), after
// commands sent on its replacement. On standalone that could break exclusion: a client's waiters
// share one id, and a late `leave` of that id frees a key that a later grant gave to another fiber
// of the same client (the fault matrix's connection-silent cell found it). So `watch` closes the
// silent connection at the server (`CLIENT KILL ID ... ADDR ...`, sent on the new connection) before
// the new one carries any lock command. Replicated deployments grant nothing (their waiters are only
// woken), so a late command there can at worst leave a key held until its lease ends.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import type { LockRedisError } from "@sage/lock/LockError"
import type { SubscriberClient } from "./clients.ts"
import type { Classify } from "./failures.ts"
import { type CommandClient, sendWithin } from "./sending.ts"
import { silenceProbe } from "./silenceProbe.ts"
import { type Destroyable, destroyForGood } from "./teardown.ts"

/**
 * What the watcher needs of a client (node-redis's, or another client's adapted to this shape):
 * commands, its ready state, its reconnections (each one is a new connection at the server, with a
 * new id), and a way to destroy it; a duplicate, for a client whose wake-ups subscribe on one.
 */
export interface WatchedClient extends CommandClient, Destroyable {
  on(event: "connect" | "ready" | "reconnecting", listener: () => void): unknown
  duplicate?(): SubscriberClient
}

/** How to open a connection of the layer (scoped: it closes with its scope), and read its client's failures. */
export interface Options<C extends WatchedClient> {
  readonly open: Effect.Effect<C, LockRedisError, Scope.Scope>
  readonly classify: Classify
}

/** The connection in service, as a client: commands, a duplicate of the client in service, `onNoReply`. */
export interface Watching extends CommandClient {
  readonly onNoReply: () => void
  duplicate(): SubscriberClient
}

/** A connection as the server knows it: its id, and its address when `CLIENT INFO` could say. */
export interface ServerSide {
  readonly id: number
  readonly addr: string | undefined
}

/**
 * Reads `CLIENT INFO`'s reply (`id=7 addr=127.0.0.1:50000 laddr=... fd=8 ...`, one line); `undefined`
 * when it has no numeric id.
 */
export const serverSideOf = (reply: unknown): ServerSide | undefined => {
  if (typeof reply !== "string") return undefined
  const id = /(?:^|\s)id=(\d+)(?:\s|$)/.exec(reply)?.[1]
  if (id === undefined) return undefined
  const addr = /(?:^|\s)addr=(\S+)/.exec(reply)?.[1]
  return { id: Number(id), addr }
}

/**
 * The `CLIENT KILL` that closes `side` at the server: by id and address, so that an id the server
 * has since given to another client (it restarted) closes nothing; by id alone when the address is
 * unknown.
 */
export const killArgs = (side: ServerSide): Array<string> =>
  side.addr === undefined
    ? ["CLIENT", "KILL", "ID", String(side.id)]
    : ["CLIENT", "KILL", "ID", String(side.id), "ADDR", side.addr]

/** How long the `CLIENT KILL` that fences a silent connection off may take. */
const fenceTimeoutMillis = 2_000

/** Who each watched client's current connection is at the server, once it has answered. */
interface ServerSides<C> {
  readonly of: (client: C) => ServerSide | undefined
  /** Asks `client`'s id now, and again after each reconnection, which changes it. */
  readonly track: (client: C) => void
}

const serverSides = <C extends WatchedClient>(): ServerSides<C> => {
  // Who each client's current connection is at the server, once it has answered.
  const sides = new WeakMap<C, ServerSide>()
  // Bumped at each ask and each reconnection: an answer counts only for the ask that is current.
  const generations = new WeakMap<C, number>()
  const askId = (client: C): void => {
    // Each answer is checked against the connection it was asked on: one asked before a reconnect
    // may come back (as a failure, normally) after it.
    const asked = (generations.get(client) ?? 0) + 1
    generations.set(client, asked)
    const stillAsked = () => generations.get(client) === asked
    client.sendCommand(["CLIENT", "INFO"], { timeout: 0 }).then(
      (reply) => {
        const side = serverSideOf(reply)
        if (side !== undefined && stillAsked()) sides.set(client, side)
      },
      // Refused (a user without client|info): the id alone, as the lock asked before.
      () => {
        if (!stillAsked()) return
        client.sendCommand(["CLIENT", "ID"], { timeout: 0 }).then(
          (reply) => {
            if (typeof reply === "number" && stillAsked()) sides.set(client, { id: reply, addr: undefined })
          },
          () => {}
        )
      }
    )
  }
  return {
    of: (client) => sides.get(client),
    track: (client) => {
      client.on("reconnecting", () => {
        sides.delete(client)
        generations.set(client, (generations.get(client) ?? 0) + 1)
      })
      client.on("ready", () => askId(client))
      askId(client)
    }
  }
}

/** The connection a watcher keeps in service, and what replacing it needs. */
interface Watched<C extends WatchedClient> {
  readonly open: Effect.Effect<C, LockRedisError, Scope.Scope>
  readonly classify: Classify
  readonly layerScope: Scope.Scope
  readonly sides: ServerSides<C>
  current: C
  /** Each connection has a scope of its own, so that a replaced one closes at once. */
  currentScope: Scope.Closeable
  closed: boolean
  /**
   * A replacement under way. When the layer closes it is not waited for: its new connection's scope
   * is a child of the layer's, so that connection is closed as soon as its connect settles.
   */
  replacing: Fiber.Fiber<void> | undefined
}

/** Opens a new connection, fences `silent` off at the server through it, and puts it in service. */
const replace = <C extends WatchedClient>(watched: Watched<C>, silent: C, silentFor: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const silentSide = watched.sides.of(silent)
    if (silentSide === undefined) {
      return yield* Effect.logWarning(
        `redis connection answered nothing for ${silentFor} ms while reported ready; it is kept: its id at the server is unknown (the user may lack client|info and client|id), so it cannot be closed at the server first`
      )
    }
    const scope = yield* Scope.fork(watched.layerScope)
    const opened = yield* Effect.exit(Scope.provide(scope)(watched.open))
    if (Exit.isFailure(opened)) {
      yield* Scope.close(scope, Exit.void)
      return yield* Effect.logWarning(
        `redis connection answered nothing for ${silentFor} ms; a new one could not be opened, keeping it`,
        opened.cause
      )
    }
    const fresh = opened.value
    // Nothing the silent connection still delivers may run after the new one's commands.
    const fenced = yield* Effect.exit(sendWithin(fresh, killArgs(silentSide), fenceTimeoutMillis, watched.classify))
    if (Exit.isFailure(fenced) || watched.closed || watched.current !== silent) {
      yield* Scope.close(scope, Exit.void)
      if (Exit.isFailure(fenced)) {
        yield* Effect.logWarning(
          `redis connection answered nothing for ${silentFor} ms; it is kept: it could not be closed at the server first (the user may lack client|kill)`,
          fenced.cause
        )
      }
      return
    }
    const retired = watched.currentScope
    watched.current = fresh
    watched.currentScope = scope
    watched.sides.track(fresh)
    yield* Effect.logWarning(
      `redis connection answered nothing for ${silentFor} ms while reported ready; ${
        fenced.value === 0 ? "the server had already dropped it" : "closed at the server"
      }, and replaced by a new one`
    )
    // Its commands still waiting fail (retryable) at once: a graceful close would wait on a
    // connection that answers nothing, and node-redis 5 cannot destroy a client whose close began.
    yield* Effect.sync(() => destroyForGood(silent))
    yield* Scope.close(retired, Exit.void)
  })

/**
 * Opens a connection with `open` and returns a `SharedClient` over it that replaces it when it goes
 * silent (see the module comment). Each connection closes with the scope, or when it is replaced.
 *
 * **Fencing.** A lock's commands must reach the server in the order they were sent: a waiter's
 * `leave` that a buffering middlebox delivered after a later grant to the same client would free a
 * key another fiber holds. So the silent connection is closed at the server before the new one
 * carries anything: each connection's id and address, as the server sees them, are asked once it is
 * open (`CLIENT INFO`, without waiting for the answer), and the new connection's first command is
 * `CLIENT KILL ID <id> ADDR <address>` of the silent one. Whatever the silent connection delivers
 * after that is never run. The address is there because ids start again from 1 when the server
 * restarts: a silent connection that never saw the restart still has its old id, which by then may
 * be another client's; that client's address is not the silent connection's. A user without
 * `client|info` gets the id alone (`CLIENT ID`, as the lock asked before), and the kill names the
 * id alone. Without an id (a user without either) or without `client|kill`, the silent connection is
 * kept, as if nothing were watched. node-redis reconnects a client on its own, and each new
 * connection has a new id: the id is forgotten when the client starts reconnecting and asked again
 * when it is ready. A kill that finds no such client (reply 0) means the server has already dropped
 * that connection, so nothing it carries can run there either.
 */
export const watch = <C extends WatchedClient>(
  options: Options<C>
): Effect.Effect<Watching, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const layerScope = yield* Scope.Scope
    const context = yield* Effect.context<never>()
    const sides = serverSides<C>()
    const currentScope = yield* Scope.fork(layerScope)
    const current: C = yield* Scope.provide(currentScope)(options.open)
    sides.track(current)
    const watched: Watched<C> = {
      open: options.open,
      classify: options.classify,
      layerScope,
      sides,
      current,
      currentScope,
      closed: false,
      replacing: undefined
    }
    yield* Scope.addFinalizer(
      layerScope,
      Effect.sync(() => {
        watched.closed = true
      })
    )

    const probe = silenceProbe(
      () => (watched.closed || watched.replacing !== undefined ? undefined : watched.current),
      (silent, silentFor) => {
        if (watched.closed || watched.replacing !== undefined) return
        watched.replacing = Effect.runForkWith(context)(
          replace(watched, silent as C, silentFor).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                watched.replacing = undefined
              })
            )
          )
        )
      }
    )

    return {
      sendCommand: (args, commandOptions) => watched.current.sendCommand(args, commandOptions),
      duplicate: (): SubscriberClient => {
        const client = watched.current
        if (client.duplicate === undefined) throw new Error("this client has no duplicate to subscribe with")
        return client.duplicate()
      },
      onNoReply: probe
    }
  })
