/**
 * Server-side faults as thin Effects over `RedisServer.command`: client pauses, DEBUG SLEEP, a lock
 * key deleted or overwritten by someone else, the library's connections killed, memory limits. Each
 * helper is one or two admin commands; see servers-and-faults.md (S3–S7) for what servers answer.
 * Process-level faults (SIGSTOP, kill -9, restart) are on `RedisServer` itself; network faults are
 * in `FaultProxy`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Net from "node:net"
import type { RedisServer } from "./RedisServer.ts"
import { encode } from "./internal/resp.ts"
import { TestkitError } from "./TestkitError.ts"

/** `CLIENT PAUSE millis mode`: WRITE blocks writes (and EVAL without no-writes), ALL blocks everything. */
export const clientPause = (
  server: RedisServer,
  millis: number,
  mode: "WRITE" | "ALL" = "ALL"
): Effect.Effect<void, TestkitError> => Effect.asVoid(server.command("CLIENT", "PAUSE", String(millis), mode))

/** `CLIENT UNPAUSE` (note: under `ALL` it is itself blocked until the pause ends). */
export const clientUnpause = (server: RedisServer): Effect.Effect<void, TestkitError> =>
  Effect.asVoid(server.command("CLIENT", "UNPAUSE"))

/** How long `debugSleep` waits after the write left this process, so the server is surely asleep. */
export const debugSleepGraceMs = 50

/**
 * Sends `args` on a connection of its own and returns once the command was written (plus
 * `debugSleepGraceMs`), without waiting for the reply: for commands that block the server (DEBUG
 * SLEEP, an endless script). The connection waits for the reply in a fiber of the current scope, so
 * nothing outlives the scope.
 */
export const sendDetached = (
  server: RedisServer,
  args: ReadonlyArray<string>
): Effect.Effect<void, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const socket = yield* openSocket(server, args.slice(0, 2).join(" "))
    yield* write(socket, args)
    // The reply (or the scope closing) ends the wait; the scope's release destroys the socket.
    yield* Effect.forkScoped(reply(socket))
    yield* Effect.sleep(debugSleepGraceMs)
  })

/** A plain TCP connection to `server`, destroyed with the scope. */
const openSocket = (server: RedisServer, what: string): Effect.Effect<Net.Socket, TestkitError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<Net.Socket, TestkitError>((resume) => {
      const socket = Net.connect({ host: server.host, port: server.port })
      const onError = (cause: Error): void =>
        resume(Effect.fail(new TestkitError({ reason: "CommandFailed", message: `${what}: ${cause.message}`, cause })))
      socket.once("error", onError)
      socket.once("connect", () => {
        socket.off("error", onError)
        socket.on("error", () => {})
        resume(Effect.succeed(socket))
      })
      return Effect.sync(() => socket.destroy())
    }),
    (socket) => Effect.sync(() => socket.destroy())
  )

const write = (socket: Net.Socket, args: ReadonlyArray<string>): Effect.Effect<void, TestkitError> =>
  Effect.callback<void, TestkitError>((resume) => {
    socket.write(encode(args), (error) =>
      resume(
        error
          ? Effect.fail(new TestkitError({ reason: "CommandFailed", message: `${args[0]}: ${error.message}` }))
          : Effect.void
      )
    )
  })

/** Waits for the next reply bytes (or the connection closing): enough for one short reply. */
const reply = (socket: Net.Socket): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const done = (): void => {
      socket.off("data", done)
      socket.off("close", done)
      resume(Effect.void)
    }
    socket.once("data", done)
    socket.once("close", done)
  })

/**
 * The connection limit (scenario S12): on a connection held for the purpose, `CONFIG SET maxclients
 * 1` and `CLIENT KILL TYPE normal SKIPME yes`, so every ordinary client is cut off and each new
 * connection gets `ERR max number of clients reached`; after `millis`, the previous limit on the same
 * connection (no new one could get in). Replica links and pub/sub connections are not killed. Not
 * for a Sentinel master: the sentinels' own connections would be refused, and they would fail over.
 */
export const connectionLimit = (server: RedisServer, millis: number): Effect.Effect<void, TestkitError> =>
  Effect.scoped(
    Effect.gen(function* () {
      const previous = yield* server.command("CONFIG", "GET", "maxclients")
      const restore = Array.isArray(previous) ? String(previous[1] ?? "10000") : "10000"
      const socket = yield* openSocket(server, "CONFIG SET maxclients")
      const send = (args: ReadonlyArray<string>) => Effect.andThen(write(socket, args), reply(socket))
      yield* send(["CONFIG", "SET", "maxclients", "1"])
      yield* Effect.ensuring(
        Effect.andThen(send(["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]), Effect.sleep(millis)),
        Effect.ignore(send(["CONFIG", "SET", "maxclients", restore]))
      )
    })
  )

/**
 * A peer that accepts every TCP connection on loopback and never answers, like a stalled process
 * behind a live socket: what bounds a client's connect is then its own timeout. Closed with the
 * scope; answers its port.
 */
export const silentPeer: Effect.Effect<number, never, Scope.Scope> = Effect.map(
  Effect.acquireRelease(
    Effect.callback<{ readonly server: Net.Server; readonly sockets: Set<Net.Socket> }>((resume) => {
      const sockets = new Set<Net.Socket>()
      const server = Net.createServer((socket) => {
        sockets.add(socket)
        socket.on("close", () => sockets.delete(socket))
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, sockets })))
    }),
    // A client may still hold its connection open: the close would wait for it.
    ({ server, sockets }) =>
      Effect.callback<void>((resume) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  ),
  ({ server }) => (server.address() as Net.AddressInfo).port
)

/**
 * A LOADING window (scenario S11b): fills the server with `keys` filler keys, slows loading to
 * `key-load-delay` µs per key, and sends `DEBUG RELOAD` on a connection of its own; while it
 * reloads, every other client gets `LOADING ...`. Waits for the reload to end, then removes the
 * filler and restores the settings. A sleep per key lasts longer than asked (timer slack): 20,000
 * keys at 15 µs load in about 2.4 s. Lock keys survive it (they are in the dump, with their expiry). Standalone and replicated masters (not a Cluster node: the filler
 * keys would span every slot).
 */
export const loading = (
  server: RedisServer,
  keys: number,
  delayMicros = 15
): Effect.Effect<void, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* populate(server, keys, "loading-filler", 10)
    const interval = yield* server.command("CONFIG", "GET", "loading-process-events-interval-bytes")
    // Loading answers other clients (LOADING ...) every 1 KiB read, not every 2 MiB.
    yield* server.command("CONFIG", "SET", "loading-process-events-interval-bytes", "1024")
    yield* server.command("CONFIG", "SET", "key-load-delay", String(delayMicros))
    const socket = yield* openSocket(server, "DEBUG RELOAD")
    yield* write(socket, ["DEBUG", "RELOAD"])
    yield* reply(socket)
    yield* server.command("CONFIG", "SET", "key-load-delay", "0")
    yield* server.command(
      "CONFIG",
      "SET",
      "loading-process-events-interval-bytes",
      Array.isArray(interval) ? String(interval[1] ?? "2097152") : "2097152"
    )
    yield* unpopulate(server, keys, "loading-filler")
  })

/**
 * Sends `DEBUG SLEEP seconds` on a connection of its own and returns once the command was written
 * (plus `debugSleepGraceMs`), while the server sleeps (see `sendDetached`). Needs
 * `enable-debug-command` (the kit sets it).
 */
export const debugSleep = (server: RedisServer, seconds: number): Effect.Effect<void, TestkitError, Scope.Scope> =>
  sendDetached(server, ["DEBUG", "SLEEP", String(seconds)])

/**
 * Makes the server BUSY for about `millis` (scenario S10): lowers `busy-reply-threshold` to 100 ms,
 * runs `EVAL "while true do end" 0` on a connection of its own, waits, then `SCRIPT KILL` (retried
 * until the script is gone) and restores the threshold. Meanwhile every other client gets
 * `BUSY ...`; the script never writes, so it can always be killed.
 */
export const busyScript = (server: RedisServer, millis: number): Effect.Effect<void, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const previous = yield* server.command("CONFIG", "GET", "busy-reply-threshold")
    const restore = Array.isArray(previous) ? String(previous[1] ?? "5000") : "5000"
    yield* server.command("CONFIG", "SET", "busy-reply-threshold", "100")
    yield* sendDetached(server, ["EVAL", "while true do end", "0"])
    yield* Effect.sleep(Math.max(0, millis - debugSleepGraceMs))
    // SCRIPT KILL until the server says no script runs (NOTBUSY). An OK only means the kill was
    // asked for: the script stops at its next check, and a command sent right after the OK could
    // still be answered BUSY. On a loaded machine one attempt may time out: that is retried too,
    // within ten seconds.
    const started = yield* Clock.monotonicTimeNanos
    for (;;) {
      const reply = yield* Effect.result(
        server.commandWith({ timeoutMs: 2000, errorReplyAsValue: true }, "SCRIPT", "KILL")
      )
      if (reply._tag === "Success" && String(reply.success).startsWith("NOTBUSY")) break
      if ((yield* Clock.monotonicTimeNanos) - started > 10_000_000_000n) {
        return yield* new TestkitError({
          reason: "CommandFailed",
          message: `SCRIPT KILL did not end the busy script within 10 s: ${
            reply._tag === "Success" ? String(reply.success) : reply.failure.message
          }`
        })
      }
      yield* Effect.sleep(20)
    }
    yield* server.command("CONFIG", "SET", "busy-reply-threshold", restore)
  })

/**
 * `CLIENT KILL TYPE normal SKIPME yes`: closes every ordinary client connection (the library's
 * included, pub/sub and replica links excluded); returns how many were killed.
 */
export const killNormalClients = (server: RedisServer): Effect.Effect<number, TestkitError> =>
  Effect.map(server.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"), Number)

/** `DEL key`; returns how many keys were removed (0 or 1). */
export const deleteKey = (server: RedisServer, key: string): Effect.Effect<number, TestkitError> =>
  Effect.map(server.command("DEL", key), Number)

/**
 * Overwrites `key` with another owner's `value` (`SET key value [PX pxMillis]`). Without `pxMillis`
 * the foreign key never expires, as in scenario S7b.
 */
export const stealKey = (
  server: RedisServer,
  key: string,
  value: string,
  pxMillis?: number
): Effect.Effect<void, TestkitError> =>
  Effect.asVoid(
    pxMillis === undefined
      ? server.command("SET", key, value)
      : server.command("SET", key, value, "PX", String(pxMillis))
  )

/** Parses `CLIENT LIST` output into one record of fields per connection. */
export const parseClientList = (text: string): Array<Record<string, string>> =>
  text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .map((line) => {
      const fields: Record<string, string> = {}
      for (const pair of line.split(" ")) {
        const eq = pair.indexOf("=")
        if (eq > 0) fields[pair.slice(0, eq)] = pair.slice(eq + 1)
      }
      return fields
    })

/**
 * Kills every connection whose client name is exactly `name` (`CLIENT LIST`, then `CLIENT KILL ID`
 * for each; Redis 7.0 has no kill-by-name filter). Returns how many were killed.
 */
export const killClientsByName = (server: RedisServer, name: string): Effect.Effect<number, TestkitError> =>
  Effect.gen(function* () {
    const list = yield* server.command("CLIENT", "LIST")
    const ids = parseClientList(String(list))
      .filter((fields) => fields["name"] === name && fields["id"] !== undefined)
      .map((fields) => fields["id"] ?? "")
    let killed = 0
    for (const id of ids) {
      // A connection may close by itself between LIST and KILL: that reply is an error, not a failure.
      const reply = yield* server.commandReply("CLIENT", "KILL", "ID", id)
      if (reply === "OK" || reply === 1) killed++
    }
    return killed
  })

/** A `maxmemory-policy` value. */
export type EvictionPolicy =
  | "noeviction"
  | "allkeys-lru"
  | "allkeys-lfu"
  | "allkeys-random"
  | "volatile-lru"
  | "volatile-lfu"
  | "volatile-random"
  | "volatile-ttl"

/** Sets `maxmemory-policy` then `maxmemory` (bytes; 0 removes the limit). */
export const setMaxMemory = (
  server: RedisServer,
  bytes: number,
  policy: EvictionPolicy
): Effect.Effect<void, TestkitError> =>
  Effect.andThen(
    server.command("CONFIG", "SET", "maxmemory-policy", policy),
    Effect.asVoid(server.command("CONFIG", "SET", "maxmemory", String(bytes)))
  )

/** `DEBUG POPULATE count prefix size`: fills memory with filler keys, e.g. before `setMaxMemory`. */
export const populate = (
  server: RedisServer,
  count: number,
  prefix = "filler",
  size = 100
): Effect.Effect<void, TestkitError> =>
  Effect.asVoid(server.command("DEBUG", "POPULATE", String(count), prefix, String(size)))

/**
 * Deletes the keys `populate(server, count, prefix)` made (`prefix:0` .. `prefix:count-1`) with one
 * script. Standalone and replicated masters only: on a Cluster node the keys span every slot.
 */
export const unpopulate = (server: RedisServer, count: number, prefix = "filler"): Effect.Effect<void, TestkitError> =>
  Effect.asVoid(
    server.command(
      "EVAL",
      "for i = 0, tonumber(ARGV[2]) - 1 do redis.call('unlink', ARGV[1] .. ':' .. i) end return 1",
      "0",
      prefix,
      String(count)
    )
  )
