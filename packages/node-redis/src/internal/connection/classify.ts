// The one place that decides, from a node-redis failure, whether the lock may retry it.
//
// Server replies are classified by their first word only: message texts differ between Redis 7,
// Redis 8 and Valkey ("NOPERM this user has no permissions..." vs "NOPERM User x has no..."), the
// first word does not. The one exception is `ERR max number of clients reached` (a Cluster node
// says `ERR max number of clients + cluster connections reached`), a temporary refusal that shares
// the generic `ERR` prefix with permanent errors.
import { LockRedisError } from "@sage/lock/LockError"
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

/** Error replies that mean "not now": loading, busy, failing over, resharding, replicas lagging. */
const temporaryReplies: ReadonlySet<string> = new Set([
  "LOADING",
  "BUSY",
  "MASTERDOWN",
  "READONLY",
  "NOREPLICAS",
  "TRYAGAIN",
  "CLUSTERDOWN",
  "MOVED",
  "ASK",
  // A WAIT cut short because its master was demoted during a failover (the write's fate is unknown;
  // the caller already treats a write as possibly applied when its acknowledgement fails).
  "UNBLOCKED"
])

/** Socket error codes from Node that mean the connection failed, not the command. */
const connectionCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTCONN",
  "EAI_AGAIN"
])

const firstWord = (message: string): string => message.split(" ", 1)[0] ?? ""

/**
 * A `WAIT` sent to a node that is a replica by the time it runs: a failover demoted the master
 * between the write and its acknowledgement. Redis and Valkey answer with a generic `ERR`, so the
 * text decides; the failure gets the code `NOT_MASTER` (the write's fate is unknown, the view is stale).
 */
const isWaitOnReplica = (message: string): boolean => /^ERR WAIT(AOF)? cannot be used with replica/i.test(message)

/**
 * An error a command raised inside a running script: Redis and Valkey append ` script: <sha1>, on
 * @user_script:<line>.` to it (Valkey 9 writes ` script: on @user_script:<line>.`, without the SHA1). The script may have written before that command (a lock key set,
 * then its fence key found to hold another type, or `OOM` for a grant after a release's `DEL`), so
 * the call may have had effects. A temporary refusal inside a script (`READONLY` on a replica) comes
 * from its first write, so nothing was written before it.
 */
const isErrorInsideScript = (message: string): boolean =>
  / script: (?:[0-9a-f]+, )?on @user_script:\d+\.?$/.test(message) && !isTemporaryReply(message)

/** The first word of a server reply, e.g. `"NOPERM"` for `"NOPERM this user has..."`. */
export const replyCode = firstWord

/** Whether a sentinel's error reply says it monitors no master of the asked name. */
export const isUnknownMasterReply = (message: string): boolean => /no such master/i.test(message)

/** Whether an error reply is a temporary refusal that the lock may retry. */
export const isTemporaryReply = (message: string): boolean =>
  temporaryReplies.has(firstWord(message)) ||
  message.startsWith("ERR max number of clients") ||
  isWaitOnReplica(message)

const make = (
  command: string,
  fields: Pick<LockRedisError, "kind" | "code" | "reply" | "retryable" | "mayHaveExecuted">,
  cause: unknown
): LockRedisError => new LockRedisError({ command, ...fields, cause })

/**
 * Turns anything node-redis rejected with into a classified `LockRedisError`. `sent` says whether the
 * command may have reached the server (false for offline-queue rejections).
 */
export const classify = (command: string, error: unknown): LockRedisError => {
  const message = error instanceof Error ? error.message : String(error)
  if (error instanceof ErrorReply) {
    return make(
      command,
      {
        kind: "server",
        code: isWaitOnReplica(message) ? "NOT_MASTER" : firstWord(message),
        reply: message,
        retryable: isTemporaryReply(message),
        mayHaveExecuted: isErrorInsideScript(message)
      },
      error
    )
  }
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
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  if (connectionCodes.has(code)) {
    return make(command, { kind: "connection", code, reply: message, retryable: true, mayHaveExecuted: true }, error)
  }
  if (error instanceof Error && error.name === "AbortError") {
    return make(
      command,
      { kind: "timeout", code: "ABORTED", reply: message, retryable: true, mayHaveExecuted: true },
      error
    )
  }
  return make(
    command,
    { kind: "connection", code: code || "UNKNOWN", reply: message, retryable: false, mayHaveExecuted: true },
    error
  )
}
