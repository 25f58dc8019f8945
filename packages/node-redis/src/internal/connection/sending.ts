// Sending commands and the lock scripts within a time limit, for any connection (shared or
// dedicated) of any client that can send a command: the client's own failures are read by the
// `Classify` it comes with (commands.ts binds node-redis's). What the scripts' replies mean is
// `internal/replies.ts`.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { LockRedisError } from "@sage/lock/LockError"
import * as Scripts from "../scripts.ts"
import * as Deadlines from "./deadlines.ts"
import type { Classify } from "./failures.ts"

/**
 * Sends one command with its own timeout in milliseconds. A way of sending over a node-redis client
 * also runs whole scripts in one step (`script`, see `scriptWithin`).
 */
export interface Send {
  (args: ReadonlyArray<string>, timeoutMillis: number): Effect.Effect<unknown, LockRedisError>
  readonly script?: ScriptCall | undefined
}

/** Reads a script's reply: the value, or the failure the reply means. Plain code, no Effect. */
export type Parse<A> = (reply: unknown) => Result.Result<A, LockRedisError>

/** Runs a lock script (`EVALSHA`, then `EVAL` on `NOSCRIPT`) and parses its reply. */
export type ScriptCall = <A>(
  script: Scripts.Script,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string>,
  timeoutMillis: number,
  parse: Parse<A>
) => Effect.Effect<A, LockRedisError>

/**
 * What `sendWithin` needs of a client's connection (a node-redis client or pooled connection, or
 * any other client wrapped to this shape).
 */
export interface CommandClient {
  sendCommand(args: Array<string>, options?: { readonly timeout?: number }): Promise<unknown>
  /**
   * Told when a command sent here got no reply within its time limit (never on the reply path).
   * The connections the lock keeps open (the standalone layer's, the pool's shared ones) use it to
   * notice one that has gone silent (`silentConnection.ts`).
   */
  readonly onNoReply?: (() => void) | undefined
}

/**
 * Turns node-redis's own per-command timeout off for one command. Since node-redis 6 every command
 * gets a 5 s `AbortSignal.timeout` unless told otherwise; that signal's timer is never cleared, so
 * at thousands of commands a second it costs more CPU and garbage than the command itself (measured:
 * 1.7 us per PING without it, 6-9 us with it). `sendWithin` bounds every command with its own timer.
 */
const noClientTimeout = { timeout: 0 } as const

/** The failure of a command that got no reply within its time limit. */
export const noReply = (command: string, timeoutMillis: number): LockRedisError =>
  new LockRedisError({
    command,
    kind: "timeout",
    code: "TIMEOUT",
    reply: `no reply within ${Math.round(timeoutMillis)} ms`,
    retryable: true,
    mayHaveExecuted: true
  })

/**
 * Sends one command and completes within `timeoutMillis` whatever the server does.
 *
 * node-redis's own `timeout` only drops a command that has not been written yet; once written, the
 * command waits for its reply forever. So a time limit bounds the wait (`deadlines.ts`: one timer
 * shared by every command in flight), and a late reply is ignored. node-redis's timeout is turned off (it costs an `AbortSignal` timer per command): a
 * command queued while the client reconnects may therefore still run once it is back, which is
 * safe for every lock command (an abandoned acquire is followed in the same queue by its cleanup
 * release; renew, release and leave are harmless late). No timer of its own, no fiber and no
 * abort signal: this is on every lock call's path.
 */
export const sendWithin = (
  client: CommandClient,
  args: Array<string>,
  timeoutMillis: number,
  classify: Classify
): Effect.Effect<unknown, LockRedisError> =>
  Effect.callback<unknown, LockRedisError>((resume) => {
    const millis = Math.max(1, Math.ceil(timeoutMillis))
    let done = false
    const timer = Deadlines.after(millis, () => {
      done = true
      client.onNoReply?.()
      resume(Effect.fail(noReply(args[0] ?? "command", millis)))
    })
    client.sendCommand(args, noClientTimeout).then(
      (reply) => {
        if (done) return
        done = true
        Deadlines.cancel(timer)
        resume(Effect.succeed(reply))
      },
      (error: unknown) => {
        if (done) return
        done = true
        Deadlines.cancel(timer)
        resume(Effect.fail(classify(args[0] ?? "command", error)))
      }
    )
    return Effect.sync(() => {
      done = true
      Deadlines.cancel(timer)
    })
  })

/**
 * A lock script on one client, in one step: `EVALSHA`, `EVAL` if the server answers `NOSCRIPT`, and
 * `parse`, all inside one callback, within `timeoutMillis` in all (the `EVAL` does not get a second
 * budget). Same rules as `sendWithin`. This is every lock call's path: the composed form
 * (`runScript` and a parse step) costs two more Effect steps per command, which at tens of thousands
 * of commands a second show up as client CPU.
 */
export const scriptWithin =
  (client: CommandClient, classify: Classify): ScriptCall =>
  (script, keys, args, timeoutMillis, parse) =>
    Effect.callback((resume) => {
      const millis = Math.max(1, Math.ceil(timeoutMillis))
      let done = false
      const timer = Deadlines.after(millis, () => {
        done = true
        client.onNoReply?.()
        resume(Effect.fail(noReply("EVALSHA", millis)))
      })
      const settle = (outcome: Parameters<typeof resume>[0]) => {
        done = true
        Deadlines.cancel(timer)
        resume(outcome)
      }
      const onReply = (reply: unknown) => {
        if (!done) settle(Effect.fromResult(parse(reply)))
      }
      const send = (command: "EVALSHA" | "EVAL"): void => {
        client
          .sendCommand(Scripts.evalArgs(command, script, keys, args), noClientTimeout)
          .then(onReply, (error: unknown) => {
            if (done) return
            const failure = classify(command, error)
            if (command === "EVALSHA" && failure.code === "NOSCRIPT") send("EVAL")
            else settle(Effect.fail(failure))
          })
      }
      send("EVALSHA")
      return Effect.sync(() => {
        done = true
        Deadlines.cancel(timer)
      })
    })

/** The way of sending over one client's connection: single commands, and scripts in one step. */
export const sendOver = (client: CommandClient, classify: Classify): Send => {
  const send = (args: ReadonlyArray<string>, timeoutMillis: number) =>
    sendWithin(client, args as Array<string>, timeoutMillis, classify)
  return Object.assign(send, { script: scriptWithin(client, classify) })
}

/**
 * Sends several commands at once, in order, on one connection (they go out in one write), each
 * bounded by the same `timeoutMillis`, and answers every command's outcome, in order. Same rules as
 * `sendWithin`; one time limit for the batch instead of one per command and no fiber per command: this
 * is how a replicated write sends its script, `ROLE` and `WAIT` together.
 */
export const sendAllWithin = (
  client: CommandClient,
  commands: ReadonlyArray<ReadonlyArray<string>>,
  timeoutMillis: number,
  classify: Classify
): Effect.Effect<Array<Result.Result<unknown, LockRedisError>>> =>
  Effect.callback<Array<Result.Result<unknown, LockRedisError>>>((resume) => {
    const millis = Math.max(1, Math.ceil(timeoutMillis))
    const outcomes: Array<Result.Result<unknown, LockRedisError> | undefined> = commands.map(() => undefined)
    let pending = commands.length
    let done = false
    const finish = () => {
      done = true
      Deadlines.cancel(timer)
      resume(
        Effect.succeed(
          outcomes.map((outcome, i) => outcome ?? Result.fail(noReply(commands[i]?.[0] ?? "command", millis)))
        )
      )
    }
    const timer = Deadlines.after(millis, () => {
      client.onNoReply?.()
      finish()
    })
    commands.forEach((args, i) => {
      client.sendCommand(args as Array<string>, noClientTimeout).then(
        (reply) => {
          if (done) return
          outcomes[i] = Result.succeed(reply)
          if (--pending === 0) finish()
        },
        (error: unknown) => {
          if (done) return
          outcomes[i] = Result.fail(classify(args[0] ?? "command", error))
          if (--pending === 0) finish()
        }
      )
    })
    return Effect.sync(() => {
      done = true
      Deadlines.cancel(timer)
    })
  })

/** Runs a lock script by SHA1, re-sending its source on NOSCRIPT (which also re-caches it). */
export const runScript = (
  send: Send,
  script: Scripts.Script,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string>,
  timeoutMillis: number
): Effect.Effect<unknown, LockRedisError> =>
  send(Scripts.evalArgs("EVALSHA", script, keys, args), timeoutMillis).pipe(
    Effect.catchIf(
      (error) => error.code === "NOSCRIPT",
      () => send(Scripts.evalArgs("EVAL", script, keys, args), timeoutMillis)
    )
  )

/**
 * How to run scripts with `send`, parsing their replies: in one step over a node-redis client
 * (`Send.script`), otherwise `runScript` and then `parse`.
 */
export const scriptsOver = (send: Send): ScriptCall =>
  send.script ??
  ((script, keys, args, timeoutMillis, parse) =>
    Effect.flatMap(runScript(send, script, keys, args, timeoutMillis), (reply) => Effect.fromResult(parse(reply))))
