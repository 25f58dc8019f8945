/**
 * The standalone backend over any Redis client that can send a command: give it one or more
 * connections (a function that sends a command and resolves with the reply), and optionally a
 * subscriber for wake-ups, and it runs the lock's, the semaphore's and the election's scripts on
 * them exactly as the node-redis backend does on its own.
 *
 * **Details**
 * - Each lock key always goes to the same connection, so its commands stay in order on the server;
 *   each connection must deliver commands in the order they are sent (a pipelined client does).
 * - Every command carries its own time limit (what is left of the caller's budget), whatever the
 *   client's own timeouts; a late reply is ignored.
 * - A script is sent by SHA1 (`EVALSHA`) and re-sent whole on `NOSCRIPT`.
 * - Failures: `classify` turns what the client rejected with into a `LockRedisError`. The default
 *   reads an error whose message begins with a server error code (`NOSCRIPT ...`, `NOPERM ...`)
 *   as that reply and Node's socket error codes as connection failures; anything else is a
 *   permanent failure. Write your own from `replyFailure` and `otherFailure` for the client's own
 *   error classes.
 * - Standalone servers only: Sentinel and Cluster need the client's view of the topology and
 *   connections of the lock's own to each master (see the node-redis backend).
 *
 * This module does not load node-redis: `@sage/lock-ioredis` is built on it.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Lock, LockBackend } from "@sage/lock"
 * import * as CommandBackend from "@sage/lock-node-redis/CommandBackend"
 *
 * // Any client: here, one with a `call(command, ...args)` method.
 * declare const client: { call(command: string, ...args: Array<string>): Promise<unknown> }
 *
 * const BackendLive = Layer.effect(
 *   LockBackend.LockBackend,
 *   CommandBackend.make({
 *     description: "my client",
 *     connections: [{ send: ([command, ...args]) => client.call(command!, ...args) }]
 *   })
 * )
 * const program = Lock.withLock("report", { waitTimeout: "5 seconds" })(Effect.log("alone")).pipe(
 *   Effect.provide(Lock.layer({ namespace: "app" })),
 *   Effect.provide(BackendLive)
 * )
 * ```
 *
 * @since 0.2.1
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as LockBackend from "@sage/lock/LockBackend"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import { defaultReconnect } from "./internal/connection/clients.ts"
import * as Failures from "./internal/connection/failures.ts"
import { sendOver, sendWithin } from "./internal/connection/sending.ts"
import * as SilentConnection from "./internal/connection/silentConnection.ts"
import { fencedSet as fencedSetOver, type SetOptions, type SetResult } from "./internal/fencedSet.ts"
import { valueText } from "./internal/options/valueText.ts"
import { backendOver } from "./internal/standalone/commandBackend.ts"
import { watchable } from "./internal/wakeups/watchable.ts"

/**
 * One connection of the client: sends a command (its name first, then its arguments, all text) and
 * resolves with the server's reply as the client decodes it (integers as numbers, bulk strings as
 * strings, arrays as arrays, nil as `null`), or rejects with the client's error.
 *
 * @category models
 * @since 0.2.1
 */
export interface Connection {
  readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
  /**
   * Told when a command sent here got no reply within its time limit (never on the reply path): a
   * connection that can go silent (a middlebox that lost its state) checks itself then, and replaces
   * itself if it answers nothing.
   */
  readonly onNoReply?: (() => void) | undefined
}

/**
 * A connection that subscribes to channels, for wake-ups. The backend subscribes each channel once
 * with one listener, and unsubscribes it with that same listener.
 *
 * @category models
 * @since 0.2.1
 */
export interface Subscriber {
  readonly subscribe: (channel: string, listener: (message: string) => void) => Promise<unknown>
  readonly unsubscribe: (channel: string, listener: (message: string) => void) => Promise<unknown>
  /**
   * The subscriber's one connection, for a backend that opened it itself: when a wait runs out
   * without a message, it is asked `PING` (while `isReady`); unanswered for 5 seconds, it is closed
   * (`close`) and every channel in use is subscribed again on a new subscriber (`Options.subscriber`
   * is called again). Leave it out for a connection the application owns.
   */
  readonly connection?: SubscriberConnection | undefined
  /**
   * For a subscriber with a connection per shard (sharded pub/sub on a Cluster), opened by the
   * backend itself: the connection `channel` is subscribed on now, or `undefined` while there is
   * none. Watched as `connection` is; the same connection must come back as the same object. Once
   * one is closed, the subscriber must open another for its channels (they are subscribed again).
   */
  readonly connectionFor?: ((channel: string) => SubscriberConnection | undefined) | undefined
}

/**
 * A subscriber's own connection, watched for silence (see `Subscriber.connection`).
 *
 * @category models
 * @since 0.2.1
 */
export interface SubscriberConnection {
  /** Connected, and not closed since. */
  readonly isReady: boolean
  /** Sends one command (`PING`) on the subscribed connection. */
  readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
  /** Closes it for good, whatever state it is in. */
  readonly close: () => void
}

/**
 * Turns what a client rejected a command with into the lock's `LockRedisError`.
 *
 * @category models
 * @since 0.2.1
 */
export type Classify = (command: string, error: unknown) => LockRedisError

/**
 * Options of `make`.
 *
 * @category options
 * @since 0.2.1
 */
export interface Options {
  /** What the backend is, for logs and spans (e.g. `"ioredis standalone"`). */
  readonly description: string
  /** The connections lock commands go on (at least one), each delivering commands in order. */
  readonly connections: ReadonlyArray<Connection>
  /**
   * Opens the subscriber for wake-ups, the first time a lock is waited for. Without it waiters
   * poll with backoff (up to a few hundred milliseconds late). A rejection leaves waiters on that
   * schedule, and the next wait asks again.
   */
  readonly subscriber?: (() => Promise<Subscriber>) | undefined
  /** Reads the client's failures. Default: `classifyByShape`. */
  readonly classify?: Classify | undefined
}

/**
 * The failure an error reply from the server means, by its first word (`NOSCRIPT`, `NOPERM`,
 * `READONLY`...): retryable when it is a temporary refusal (`LOADING`, `BUSY`, `READONLY`, ...).
 *
 * @category failures
 * @since 0.2.1
 */
export const replyFailure: (command: string, message: string, cause: unknown) => LockRedisError = Failures.replyFailure

/**
 * The failure of an error that is not a server reply: Node's socket error codes (`ECONNRESET`, ...)
 * are retryable connection failures, an `AbortError` a timeout, anything else a permanent failure.
 *
 * @category failures
 * @since 0.2.1
 */
export const otherFailure: (command: string, error: unknown) => LockRedisError = Failures.otherFailure

/**
 * The default `classify`: an `Error` whose message begins with an upper-case word followed by a
 * space (`"NOPERM this user..."`) is read as that server reply, anything else by `otherFailure`.
 *
 * @category failures
 * @since 0.2.1
 */
export const classifyByShape: Classify = (command, error) =>
  error instanceof Error && /^[A-Z][A-Z_]+ /.test(error.message)
    ? Failures.replyFailure(command, error.message, error)
    : Failures.otherFailure(command, error)

/**
 * The lock's reconnect delay after `retries` failed attempts: 20 ms doubling up to 500 ms, plus up
 * to 50 ms of jitter (a lock cannot wait seconds to reconnect). For a client's retry option, as the
 * node-redis backends use it for the connections they open.
 *
 * @category connections
 * @since 0.2.1
 */
export const reconnectDelay: (retries: number) => number = defaultReconnect

/**
 * The standalone backend over `options.connections`; what it opens (nothing of its own but the
 * subscriber, which `options.subscriber` opens and owns) follows the scope.
 *
 * @category constructors
 * @since 0.2.1
 */
export const make = (options: Options): Effect.Effect<LockBackend.Backend, InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    if (typeof options !== "object" || options === null) {
      return yield* new InvalidArgument({ field: "options", value: valueText(options), reason: "must be an object" })
    }
    const connections: unknown = options.connections
    if (!Array.isArray(connections) || connections.length === 0) {
      return yield* new InvalidArgument({
        field: "connections",
        value: valueText(connections),
        reason: "must be a non-empty array of connections"
      })
    }
    for (const connection of connections as ReadonlyArray<unknown>) {
      if (
        typeof connection !== "object" ||
        connection === null ||
        typeof (connection as Connection).send !== "function"
      ) {
        return yield* new InvalidArgument({
          field: "connections",
          value: valueText(connection),
          reason: "each connection must have a send function"
        })
      }
    }
    const classify = options.classify ?? classifyByShape
    const sends = (connections as ReadonlyArray<Connection>).map((connection) =>
      sendOver({ sendCommand: (args) => connection.send(args), onNoReply: connection.onNoReply }, classify)
    )
    const subscriber = options.subscriber
    return yield* backendOver({
      description: String(options.description),
      sends: [sends[0]!, ...sends.slice(1)],
      subscriber: subscriber === undefined ? undefined : () => subscriber().then(watchable),
      classify,
      ordered: true
    })
  })

/**
 * A client the backend opens itself and may replace (`replaceWhenSilent`): its commands, whether its
 * connection is ready, its (re)connections, and closing it at once.
 *
 * @category connections
 * @since 0.2.1
 */
export interface ReplaceableClient {
  /** Whether the client counts its connection as ready: only a ready connection is checked for silence. */
  readonly isReady: boolean
  /** Sends a command, as `Connection.send`. */
  readonly send: (args: ReadonlyArray<string>) => Promise<unknown>
  /**
   * `ready`: each time a connection (the first, or a new one after a drop) is ready, which gives it
   * a new id at the server; `reconnecting`: the connection was lost and the client tries again.
   */
  readonly on: (event: "ready" | "reconnecting", listener: () => void) => unknown
  /**
   * Closes the client at once, for good: the backend found its connection silent and replaced it.
   * Its commands still waiting should then fail as retryable disconnections.
   */
  readonly destroy: () => void
}

/**
 * A connection over clients that `open` opens, replaced when it goes silent: when a command gets no
 * reply in time and the connection then leaves `TIME` unanswered for 5 seconds while its client
 * reports it ready, a new client is opened, the silent connection is closed at the server through it
 * (`CLIENT KILL ID <id> ADDR <addr>`, read with `CLIENT INFO` whenever it became ready), and only
 * then does the new one carry commands (docs/topologies.md, "A connection that goes silent").
 * Without permission to read its id or to kill it, the silent connection is kept. Each client closes
 * with the scope, or when it is replaced.
 *
 * @category connections
 * @since 0.2.1
 */
export const replaceWhenSilent = (options: {
  readonly open: Effect.Effect<ReplaceableClient, LockRedisError, Scope.Scope>
  readonly classify?: Classify | undefined
}): Effect.Effect<Connection, LockRedisError, Scope.Scope> =>
  Effect.map(
    SilentConnection.watch({
      open: Effect.map(options.open, (client): SilentConnection.WatchedClient => ({
        get isReady() {
          return client.isReady
        },
        // Never in the middle of a connection attempt as node-redis can be: destroyed at once.
        isOpen: false,
        sendCommand: (args) => client.send(args),
        on: (event, listener) => (event === "connect" ? undefined : client.on(event, listener)),
        destroy: () => client.destroy(),
        unref: () => undefined
      })),
      classify: options.classify ?? classifyByShape
    }),
    (watching): Connection => ({
      // Passed on as they are: nothing on the way writes to them (no copy per command).
      send: (args) => watching.sendCommand(args as Array<string>),
      onNoReply: watching.onNoReply
    })
  )

/**
 * The options of `fencedSet`: `FencedWrite.SetOptions`.
 *
 * @category fenced writes
 * @since 0.2.1
 */
export type FencedSetOptions = SetOptions

/**
 * The outcome of `fencedSet`: `FencedWrite.SetResult`.
 *
 * @category fenced writes
 * @since 0.2.1
 */
export type FencedSetResult = SetResult

/**
 * `FencedWrite.set` over a connection of any client: writes `options.value` to `options.key` unless a
 * newer fencing token has written it since (`Stale`, with that token). Bad options fail with
 * `InvalidArgument` before anything is sent; a `LockRedisError` says the write may or may not have
 * been applied.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lease, Lock } from "@sage/lock"
 * import * as CommandBackend from "@sage/lock-node-redis/CommandBackend"
 *
 * declare const connection: CommandBackend.Connection
 * const save = (balance: number) =>
 *   Effect.gen(function* () {
 *     const lease = yield* Lease.Lease
 *     return yield* CommandBackend.fencedSet(connection, {
 *       key: "{account:42}:balance",
 *       value: String(balance),
 *       fencingToken: lease.fencingToken
 *     })
 *   }).pipe(Lock.withLock("account:42", { waitTimeout: "2 seconds" }))
 * ```
 *
 * @category fenced writes
 * @since 0.2.1
 */
export const fencedSet = (
  connection: Connection,
  options: FencedSetOptions,
  classify: Classify = classifyByShape
): Effect.Effect<FencedSetResult, LockRedisError | InvalidArgument> =>
  fencedSetOver(
    (args, millis) => sendWithin({ sendCommand: (command) => connection.send(command) }, [...args], millis, classify),
    options
  )
