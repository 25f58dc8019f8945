/**
 * Admin commands through a short-lived node-redis client: connect, send one command, destroy. Every
 * call is bounded by a timeout, so a paused or sleeping server fails the call instead of hanging it.
 */
import * as Effect from "effect/Effect"
import { createClient, ErrorReply } from "redis"
import { TestkitError } from "../TestkitError.ts"

/** A decoded RESP2 reply as node-redis returns it by default. */
export type Reply = string | number | null | ReadonlyArray<Reply>

/** Where and how to send one admin command. */
export interface CommandTarget {
  readonly host: string
  readonly port: number
  readonly timeoutMs: number
  readonly username?: string | undefined
  readonly password?: string | undefined
  /** Connect with TLS, trusting this CA (PEM). */
  readonly tls?: { readonly ca: string } | undefined
}

/** The outcome of one command: a reply, or the text of the server's error reply. */
export type Outcome =
  { readonly _tag: "Reply"; readonly reply: Reply } | { readonly _tag: "ErrorReply"; readonly text: string }

const describe = (target: CommandTarget, args: ReadonlyArray<string>): string =>
  `${args.join(" ")} (127.0.0.1:${target.port})`.slice(0, 200)

const label = (batch: ReadonlyArray<ReadonlyArray<string>>): ReadonlyArray<string> =>
  batch.length === 1 ? (batch[0] ?? []) : batch.flatMap((args, i) => (i === 0 ? args : [";", ...args]))

type Client = ReturnType<typeof createClient>

// node-redis's createClient builds a class holding every command whenever its options differ from
// the previous call's (address included), about 25 ms of CPU each: admin commands that alternate
// between servers (a sentinel, then the master it names) paid that on nearly every call. Clients
// duplicated from one template share its class.
let template: Client | undefined
const makeClient = (options: Parameters<typeof createClient>[0]): Client => {
  // RESP2 keeps replies plain (strings, integers, nil, arrays); node-redis 6 defaults to RESP3.
  template ??= createClient({ RESP: 2 })
  return template.duplicate(options) as Client
}

/**
 * Runs commands in order on one connection (so `WAIT` counts the writes before it); server error
 * replies are `ErrorReply` outcomes, everything else a `TestkitError`. The timeout covers the batch.
 */
export const runSession = (
  target: CommandTarget,
  batch: ReadonlyArray<ReadonlyArray<string>>
): Effect.Effect<Array<Outcome>, TestkitError> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const client = makeClient({
        socket:
          target.tls === undefined
            ? { host: target.host, port: target.port, reconnectStrategy: false, connectTimeout: target.timeoutMs }
            : {
                host: target.host,
                port: target.port,
                reconnectStrategy: false,
                connectTimeout: target.timeoutMs,
                tls: true,
                ca: target.tls.ca
              },
        RESP: 2,
        disableClientInfo: true,
        ...(target.username === undefined ? {} : { username: target.username }),
        ...(target.password === undefined ? {} : { password: target.password })
      })
      // Socket errors surface through the rejected promises below; the listener keeps them from crashing.
      client.on("error", () => {})
      return client
    }),
    (client) =>
      Effect.tryPromise({
        try: async (): Promise<Array<Outcome>> => {
          await client.connect()
          const outcomes: Array<Outcome> = []
          for (const args of batch) {
            try {
              outcomes.push({ _tag: "Reply", reply: await client.sendCommand<Reply>([...args]) })
            } catch (error) {
              if (!(error instanceof ErrorReply)) throw error
              outcomes.push({ _tag: "ErrorReply", text: error.message })
            }
          }
          return outcomes
        },
        catch: (cause) => {
          const text = cause instanceof Error ? cause.message : String(cause)
          return new TestkitError({
            reason: "CommandFailed",
            message: `${describe(target, label(batch))} failed: ${text}`,
            cause
          })
        }
      }).pipe(
        Effect.timeoutOrElse({
          duration: target.timeoutMs,
          orElse: () =>
            Effect.fail(
              new TestkitError({
                reason: "Timeout",
                message: `${describe(target, label(batch))} got no reply within ${target.timeoutMs} ms`
              })
            )
        })
      ),
    (client) =>
      Effect.sync(() => {
        // node-redis 6.3 lets a connection attempt in flight complete after destroy(), leaving an
        // open socket: destroy the client again when it reports that connection.
        client.on("connect", () => client.destroy())
        client.destroy()
      })
  )

/** Runs one command; server error replies are an `ErrorReply` outcome, everything else a `TestkitError`. */
export const run = (target: CommandTarget, args: ReadonlyArray<string>): Effect.Effect<Outcome, TestkitError> =>
  Effect.map(runSession(target, [args]), (outcomes): Outcome => outcomes[0] ?? { _tag: "ErrorReply", text: "no reply" })

/** Runs one command and fails with `TestkitError` (reason `CommandFailed`) on an error reply. */
export const command = (target: CommandTarget, args: ReadonlyArray<string>): Effect.Effect<Reply, TestkitError> =>
  Effect.flatMap(run(target, args), (outcome) =>
    outcome._tag === "Reply"
      ? Effect.succeed(outcome.reply)
      : Effect.fail(
          new TestkitError({ reason: "CommandFailed", message: `${describe(target, args)} replied: ${outcome.text}` })
        )
  )

/** Runs commands in order on one connection and fails on the first error reply. */
export const session = (
  target: CommandTarget,
  batch: ReadonlyArray<ReadonlyArray<string>>
): Effect.Effect<Array<Reply>, TestkitError> =>
  Effect.flatMap(runSession(target, batch), (outcomes) => {
    const replies: Array<Reply> = []
    for (const [i, outcome] of outcomes.entries()) {
      if (outcome._tag === "ErrorReply") {
        return Effect.fail(
          new TestkitError({
            reason: "CommandFailed",
            message: `${describe(target, batch[i] ?? [])} replied: ${outcome.text}`
          })
        )
      }
      replies.push(outcome.reply)
    }
    return Effect.succeed(replies)
  })

/** Runs one command and returns an error reply's text (e.g. "NOPERM ...") as the success value. */
export const commandReply = (target: CommandTarget, args: ReadonlyArray<string>): Effect.Effect<Reply, TestkitError> =>
  Effect.map(run(target, args), (outcome) => (outcome._tag === "Reply" ? outcome.reply : outcome.text))

/** Per-call options of `commandWith`. */
export interface CommandOptions {
  readonly username?: string | undefined
  readonly password?: string | undefined
  /** Defaults to the server's command timeout (5 s unless set in `RedisServer.start`). */
  readonly timeoutMs?: number | undefined
  /** Return an error reply's text as the success value (like `commandReply`). Default false. */
  readonly errorReplyAsValue?: boolean | undefined
}

/** The admin-command operations of a server. */
export interface Commands {
  /** One admin command on a short-lived client; fails on error replies and after the timeout. */
  readonly command: (...args: ReadonlyArray<string>) => Effect.Effect<Reply, TestkitError>
  /** Like `command`, but an error reply's text (e.g. "NOPERM ...") is the success value. */
  readonly commandReply: (...args: ReadonlyArray<string>) => Effect.Effect<Reply, TestkitError>
  /**
   * Several commands in order on one connection, e.g. `[["SET", k, v], ["WAIT", "1", "300"]]`: `WAIT`
   * counts only the writes of its own connection. Fails on the first error reply.
   */
  readonly session: (commands: ReadonlyArray<ReadonlyArray<string>>) => Effect.Effect<Array<Reply>, TestkitError>
  /** `command` with a user, password or timeout of its own. */
  readonly commandWith: (options: CommandOptions, ...args: ReadonlyArray<string>) => Effect.Effect<Reply, TestkitError>
}

/** Builds the admin-command operations for a server at host:port. */
export const makeCommands = (
  target: { readonly host: string; readonly port: number; readonly tls?: { readonly ca: string } | undefined },
  timeoutMs: number
): Commands => ({
  command: (...args) => command({ ...target, timeoutMs }, args),
  commandReply: (...args) => commandReply({ ...target, timeoutMs }, args),
  session: (commands) => session({ ...target, timeoutMs }, commands),
  commandWith: (options, ...args) => {
    const full: CommandTarget = {
      ...target,
      timeoutMs: options.timeoutMs ?? timeoutMs,
      username: options.username,
      password: options.password
    }
    return options.errorReplyAsValue === true ? commandReply(full, args) : command(full, args)
  }
})
