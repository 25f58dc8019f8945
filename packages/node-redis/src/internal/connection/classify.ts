// The one place that decides, from a node-redis failure, whether the lock may retry it: node-redis's
// own error classes here, server replies and socket errors as failures.ts reads them for any client.
import type { LockRedisError } from "@sage/lock/LockError"
import {
  ClientClosedError,
  ClientOfflineError,
  ConnectionTimeoutError,
  DisconnectsClientError,
  ErrorReply,
  ReconnectStrategyError,
  SocketClosedUnexpectedlyError,
  SocketTimeoutError,
  TimeoutError
} from "redis"
import { failure as make, otherFailure, replyFailure } from "./failures.ts"

export { isTemporaryReply, isUnknownMasterReply, replyCode } from "./failures.ts"

/**
 * Turns anything node-redis rejected with into a classified `LockRedisError`. `sent` says whether the
 * command may have reached the server (false for offline-queue rejections).
 */
export const classify = (command: string, error: unknown): LockRedisError => {
  const message = error instanceof Error ? error.message : String(error)
  if (error instanceof ErrorReply) return replyFailure(command, message, error)
  if (error instanceof TimeoutError || error instanceof SocketTimeoutError) {
    return make(
      command,
      { kind: "timeout", code: "TIMEOUT", reply: message, retryable: true, mayHaveExecuted: true },
      error
    )
  }
  if (error instanceof ClientOfflineError) {
    return make(
      command,
      { kind: "connection", code: "OFFLINE", reply: message, retryable: true, mayHaveExecuted: false },
      error
    )
  }
  if (error instanceof ClientClosedError) {
    // The client was closed on purpose (its layer was released): nothing will reconnect it.
    return make(
      command,
      { kind: "connection", code: "CLOSED", reply: message, retryable: false, mayHaveExecuted: false },
      error
    )
  }
  // DisconnectsClientError: what the commands still waiting on a client get when it is destroyed.
  // The lock destroys a connection of its own to replace it (silentConnection.ts) or when its layer
  // closes; in the first case a retry goes to the new connection, in the second it meets CLOSED.
  if (
    error instanceof SocketClosedUnexpectedlyError ||
    error instanceof ConnectionTimeoutError ||
    error instanceof DisconnectsClientError
  ) {
    return make(
      command,
      { kind: "connection", code: "DISCONNECTED", reply: message, retryable: true, mayHaveExecuted: true },
      error
    )
  }
  if (error instanceof ReconnectStrategyError) {
    return make(
      command,
      { kind: "connection", code: "GAVE_UP", reply: message, retryable: false, mayHaveExecuted: false },
      error
    )
  }
  return otherFailure(command, error)
}
