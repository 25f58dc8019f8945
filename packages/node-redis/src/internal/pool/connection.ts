// One connection of the pool as a lock operation uses it: commands with their own time limit, on a
// client the pool opened, failing as dropped (retryable) once that client's socket is gone.
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { LockRedisError } from "@sage/lock/LockError"
import type { Classify } from "../connection/failures.ts"
import { type CommandClient, sendAllWithin, sendWithin } from "../connection/sending.ts"
import type { PoolClient } from "./dialer.ts"

/** One connection, held for the duration of a `use` call. */
export interface Connection {
  /** `host:port` of the node this connection talks to. */
  readonly address: string
  /** Sends one command with its own timeout (ms). */
  readonly send: (args: ReadonlyArray<string>, timeoutMillis: number) => Effect.Effect<unknown, LockRedisError>
  /** Sends commands together (one write), each bounded by `timeoutMillis`; answers each one's outcome. */
  readonly sendAll: (
    commands: ReadonlyArray<ReadonlyArray<string>>,
    timeoutMillis: number
  ) => Effect.Effect<Array<Result.Result<unknown, LockRedisError>>>
}

/**
 * The failure of a command on a pooled connection whose socket dropped since it was handed out (a
 * failover closes them, for one). The pool's connections never reconnect, so node-redis then counts
 * the client as closed and would answer `ClientClosedError`, which means a layer closed on purpose
 * (`CLOSED`, not retryable). Retryable: the next attempt takes another connection.
 */
const dropped = (address: string, command: string): LockRedisError =>
  new LockRedisError({
    command,
    kind: "connection",
    code: "DISCONNECTED",
    reply: `the connection to ${address} was closed before the command was sent`,
    retryable: true,
    mayHaveExecuted: false
  })

/**
 * A `Connection` over a pooled client: `onNoReply` is told of a command that got no reply in time,
 * `poolClosed` says whether a client that is no longer open was closed with the pool (`CLOSED`, as
 * it should be) rather than dropped, and `classify` reads the client's failures.
 */
export const toConnection = (
  address: string,
  client: Pick<PoolClient, "isOpen" | "sendCommand">,
  onNoReply: () => void,
  poolClosed: () => boolean,
  classify: Classify
): Connection => {
  const commands: CommandClient = { sendCommand: (args, options) => client.sendCommand(args, options), onNoReply }
  const usable = () => client.isOpen || poolClosed()
  return {
    address,
    send: (args, timeoutMillis) =>
      usable()
        ? sendWithin(commands, args as Array<string>, timeoutMillis, classify)
        : Effect.fail(dropped(address, args[0] ?? "command")),
    sendAll: (batch, timeoutMillis) =>
      usable()
        ? sendAllWithin(commands, batch, timeoutMillis, classify)
        : Effect.succeed(batch.map((args) => Result.fail(dropped(address, args[0] ?? "command"))))
  }
}
