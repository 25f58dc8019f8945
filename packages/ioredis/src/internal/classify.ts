// The one place that decides, from an ioredis failure, whether the lock may retry it: ioredis's own
// errors here, server replies and socket errors as the shared reading (`CommandBackend`) does.
import { LockRedisError } from "@sage/lock/LockError"
import { otherFailure, replyFailure } from "@sage/lock-node-redis/CommandBackend"

// ioredis rejects with plain `Error`s of these texts (its own constants, stable since ioredis 4).
const connectionClosed = "Connection is closed."
const offline = "Stream isn't writeable and enableOfflineQueue options is false"
const commandTimedOut = "Command timed out"

/**
 * What a command gets that was still waiting on a connection of the lock's own that went away under
 * it: replaced because it went silent (silentConnection.ts), or a Cluster pool connection whose
 * socket closed (a failover, a node restarting), which the pool never reconnects. ioredis would
 * read either as a client closed for good. The command may have reached the server; a retry takes
 * another connection.
 */
export class ConnectionGone extends Error {
  constructor(why: string, cause: unknown) {
    super(why, { cause })
  }
}

const failure = (
  command: string,
  fields: Pick<LockRedisError, "kind" | "code" | "reply" | "retryable" | "mayHaveExecuted">,
  cause: unknown
): LockRedisError => new LockRedisError({ command, ...fields, cause })

/** Turns anything ioredis rejected a command with into a classified `LockRedisError`. */
export const classify = (command: string, error: unknown): LockRedisError => {
  if (!(error instanceof Error)) return otherFailure(command, error)
  if (error instanceof ConnectionGone) {
    return failure(
      command,
      { kind: "connection", code: "DISCONNECTED", reply: error.message, retryable: true, mayHaveExecuted: true },
      error
    )
  }
  const { message, name } = error
  // redis-errors' classes name themselves after their constructor.
  if (name === "ReplyError") return replyFailure(command, message, error)
  if (name === "MaxRetriesPerRequestError") {
    // The command waited in the queue through `maxRetriesPerRequest` reconnections; it may have
    // been written before the connection dropped.
    return failure(
      command,
      { kind: "connection", code: "DISCONNECTED", reply: message, retryable: true, mayHaveExecuted: true },
      error
    )
  }
  if (message === connectionClosed) {
    // The client ended: closed on purpose, or its `retryStrategy` gave up. Nothing reconnects it.
    return failure(
      command,
      { kind: "connection", code: "CLOSED", reply: message, retryable: false, mayHaveExecuted: true },
      error
    )
  }
  if (message === offline) {
    return failure(
      command,
      { kind: "connection", code: "OFFLINE", reply: message, retryable: true, mayHaveExecuted: false },
      error
    )
  }
  if (message === commandTimedOut) {
    // The application's own `commandTimeout` ran out before the lock's.
    return failure(
      command,
      { kind: "timeout", code: "TIMEOUT", reply: message, retryable: true, mayHaveExecuted: true },
      error
    )
  }
  return otherFailure(command, error)
}
