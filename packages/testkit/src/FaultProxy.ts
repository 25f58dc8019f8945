/**
 * An in-process TCP proxy (node:net) in front of one server port, for network faults this machine
 * cannot make otherwise (no tc netem): latency, stalls (partition, then heal), lost replies, resets
 * and refused connections. Point a client at `127.0.0.1:proxy.port` instead of the server.
 *
 * Invariant: bytes inside a live connection are never dropped or reordered. Dropping would misalign
 * RESP replies with requests (the client would resolve the wrong command), which real TCP never
 * does. So `stall` buffers both directions until `heal`, and `loseNextReply` swallows one chunk from
 * the server and then resets that connection: the command ran, the client cannot know.
 *
 * Operations are Effects (`yield* proxy.stall`); `port`, `connectionCount` and `lostReplies` are
 * plain getters. Timing uses the real monotonic clock: this is live network I/O, not TestClock code.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Net from "node:net"
import { TestkitError } from "./TestkitError.ts"

/** Which way latency applies: "up" is client to server, "down" is server to client. */
export type Direction = "up" | "down" | "both"

/** Options of `make`. */
export interface ProxyOptions {
  readonly upstreamPort: number
  /** Defaults to "127.0.0.1". */
  readonly upstreamHost?: string | undefined
}

/** A running proxy owned by a scope. */
export interface FaultProxy {
  /** The port the proxy listens on (127.0.0.1). */
  readonly port: number
  /** `redis://127.0.0.1:PORT` through the proxy. */
  readonly url: string
  /** Live proxied connections. */
  readonly connectionCount: number
  /** How many replies `loseNextReply` has swallowed so far. */
  readonly lostReplies: number
  /** Delay every later chunk by `ms` in `direction` (default "both"); order is kept. 0 removes it. */
  readonly setLatency: (ms: number, direction?: Direction) => Effect.Effect<void>
  /** Stop forwarding in both directions; bytes are buffered, not dropped. */
  readonly stall: Effect.Effect<void>
  /**
   * Stop forwarding on the connections open now, in both directions, while connections opened later
   * pass: a connection gone silent (a middlebox that lost its state, a half-open socket) with the
   * server still reachable. Bytes are buffered, not dropped; `heal` or `pass` resumes them.
   */
  readonly stallOpen: Effect.Effect<void>
  /** Resume forwarding after `stall` or `stallOpen`; buffered bytes flow at once, in order. */
  readonly heal: Effect.Effect<void>
  /** Swallow the next chunk any server sends back, then reset that client connection. */
  readonly loseNextReply: Effect.Effect<void>
  /** Destroy every live connection with a TCP RST (both sides). */
  readonly resetAll: Effect.Effect<void>
  /** Close every live connection gracefully (FIN) after its buffered bytes. */
  readonly closeAll: Effect.Effect<void>
  /** Reset new connections as soon as they are accepted (clients see ECONNRESET or a closed socket). */
  readonly refuse: Effect.Effect<void>
  /** Accept new connections again after `refuse`. */
  readonly accept: Effect.Effect<void>
  /** Back to a transparent pipe: no latency, healed, accepting, no pending reply loss. */
  readonly pass: Effect.Effect<void>
}

interface Chunk {
  readonly data: Buffer | "end"
  readonly due: number
}

interface Pipe {
  readonly dir: "up" | "down"
  readonly to: Net.Socket
  readonly queue: Array<Chunk>
  lastDue: number
  timer: NodeJS.Timeout | undefined
}

interface Connection {
  readonly client: Net.Socket
  readonly upstream: Net.Socket
  readonly up: Pipe
  readonly down: Pipe
  upstreamReady: boolean
  /** Set by `stallOpen`: this connection alone forwards nothing. */
  stalled: boolean
}

interface Settings {
  latencyUp: number
  latencyDown: number
  stalled: boolean
  refusing: boolean
  loseArmed: boolean
  lostReplies: number
}

const reset = (socket: Net.Socket): void => {
  if (socket.destroyed) return
  try {
    socket.resetAndDestroy()
  } catch {
    socket.destroy()
  }
}

const closeConnection = (connection: Connection): void => {
  for (const pipe of [connection.up, connection.down]) {
    if (pipe.timer !== undefined) clearTimeout(pipe.timer)
    pipe.timer = undefined
  }
  reset(connection.client)
  reset(connection.upstream)
}

const pump = (settings: Settings, connection: Connection, pipe: Pipe): void => {
  if (settings.stalled || connection.stalled || pipe.timer !== undefined || pipe.to.destroyed) return
  if (pipe.dir === "up" && !connection.upstreamReady) return
  while (pipe.queue.length > 0) {
    const head = pipe.queue[0]
    if (head === undefined) return
    const wait = head.due - performance.now()
    if (wait > 0) {
      pipe.timer = setTimeout(() => {
        pipe.timer = undefined
        pump(settings, connection, pipe)
      }, wait)
      return
    }
    pipe.queue.shift()
    if (head.data === "end") pipe.to.end()
    else pipe.to.write(head.data)
  }
}

const enqueue = (settings: Settings, connection: Connection, pipe: Pipe, data: Buffer | "end"): void => {
  const latency = pipe.dir === "up" ? settings.latencyUp : settings.latencyDown
  // Due times never decrease, so a latency change cannot reorder chunks.
  const due = Math.max(performance.now() + latency, pipe.lastDue)
  pipe.lastDue = due
  pipe.queue.push({ data, due })
  pump(settings, connection, pipe)
}

/** Starts a proxy to `upstreamHost:upstreamPort` on a free 127.0.0.1 port, closed with the scope. */
export const make = (options: ProxyOptions): Effect.Effect<FaultProxy, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const upstreamHost = options.upstreamHost ?? "127.0.0.1"
    const settings: Settings = {
      latencyUp: 0,
      latencyDown: 0,
      stalled: false,
      refusing: false,
      loseArmed: false,
      lostReplies: 0
    }
    const connections = new Set<Connection>()

    const onConnection = (client: Net.Socket): void => {
      client.on("error", () => {})
      if (settings.refusing) {
        reset(client)
        return
      }
      client.setNoDelay(true)
      const upstream = Net.connect({ host: upstreamHost, port: options.upstreamPort })
      upstream.setNoDelay(true)
      upstream.on("error", () => {})
      const connection: Connection = {
        client,
        upstream,
        up: { dir: "up", to: upstream, queue: [], lastDue: 0, timer: undefined },
        down: { dir: "down", to: client, queue: [], lastDue: 0, timer: undefined },
        upstreamReady: false,
        stalled: false
      }
      connections.add(connection)
      upstream.on("connect", () => {
        connection.upstreamReady = true
        pump(settings, connection, connection.up)
      })
      client.on("data", (chunk: Buffer) => enqueue(settings, connection, connection.up, chunk))
      upstream.on("data", (chunk: Buffer) => {
        if (settings.loseArmed) {
          // The command ran on the server; its reply vanishes and the connection dies, as in N2/P2.
          settings.loseArmed = false
          settings.lostReplies++
          closeConnection(connection)
          return
        }
        enqueue(settings, connection, connection.down, chunk)
      })
      client.on("end", () => enqueue(settings, connection, connection.up, "end"))
      upstream.on("end", () => enqueue(settings, connection, connection.down, "end"))
      // An abrupt close on one side (RST, error, upstream refused) resets the other.
      const onClose = (hadError: boolean): void => {
        if (hadError) closeConnection(connection)
        if (client.destroyed && upstream.destroyed) {
          closeConnection(connection)
          connections.delete(connection)
        }
      }
      client.on("close", onClose)
      upstream.on("close", onClose)
    }

    const server = yield* Effect.acquireRelease(
      Effect.callback<Net.Server, TestkitError>((resume) => {
        const server = Net.createServer({ allowHalfOpen: true }, onConnection)
        server.once("error", (cause) =>
          resume(
            Effect.fail(
              new TestkitError({ reason: "ProxyFailed", message: `proxy listen failed: ${cause.message}`, cause })
            )
          )
        )
        server.listen({ host: "127.0.0.1", port: 0 }, () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          for (const connection of connections) closeConnection(connection)
          connections.clear()
          server.close(() => resume(Effect.void))
        }).pipe(Effect.timeoutOption(2000))
    )
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0

    const pumpAll = (): void => {
      for (const connection of connections) {
        connection.stalled = false
        pump(settings, connection, connection.up)
        pump(settings, connection, connection.down)
      }
    }

    const proxy: FaultProxy = {
      port,
      url: `redis://127.0.0.1:${port}`,
      get connectionCount() {
        return connections.size
      },
      get lostReplies() {
        return settings.lostReplies
      },
      setLatency: (ms, direction = "both") =>
        Effect.sync(() => {
          if (direction !== "down") settings.latencyUp = ms
          if (direction !== "up") settings.latencyDown = ms
        }),
      stall: Effect.sync(() => {
        settings.stalled = true
      }),
      stallOpen: Effect.sync(() => {
        for (const connection of connections) connection.stalled = true
      }),
      heal: Effect.sync(() => {
        settings.stalled = false
        pumpAll()
      }),
      loseNextReply: Effect.sync(() => {
        settings.loseArmed = true
      }),
      resetAll: Effect.sync(() => {
        for (const connection of connections) closeConnection(connection)
      }),
      closeAll: Effect.sync(() => {
        for (const connection of connections) {
          enqueue(settings, connection, connection.up, "end")
          enqueue(settings, connection, connection.down, "end")
        }
      }),
      refuse: Effect.sync(() => {
        settings.refusing = true
      }),
      accept: Effect.sync(() => {
        settings.refusing = false
      }),
      pass: Effect.sync(() => {
        settings.latencyUp = 0
        settings.latencyDown = 0
        settings.stalled = false
        settings.refusing = false
        settings.loseArmed = false
        pumpAll()
      })
    }
    return proxy
  })
