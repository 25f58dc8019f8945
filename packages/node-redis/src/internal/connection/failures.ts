// Classifying a failure by what it says, whichever client reported it: a server's error reply by
// its first word, a socket error by Node's code. Each client's own errors (node-redis's classes in
// classify.ts, ioredis's in @sage/lock-ioredis) are read first and fall back to these.
//
// Server replies are classified by their first word only: message texts differ between Redis 7,
// Redis 8 and Valkey ("NOPERM this user has no permissions..." vs "NOPERM User x has no..."), the
// first word does not. The one exception is `ERR max number of clients reached` (a Cluster node
// says `ERR max number of clients + cluster connections reached`), a temporary refusal that shares
// the generic `ERR` prefix with permanent errors.
import { LockRedisError } from "@sage/lock/LockError"

/** Turns what a client rejected a command with into the lock's classified failure. */
export type Classify = (command: string, error: unknown) => LockRedisError

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

export const failure = (
  command: string,
  fields: Pick<LockRedisError, "kind" | "code" | "reply" | "retryable" | "mayHaveExecuted">,
  cause: unknown
): LockRedisError => new LockRedisError({ command, ...fields, cause })

/** The failure an error reply from the server means, by its first word. */
export const replyFailure = (command: string, message: string, cause: unknown): LockRedisError =>
  failure(
    command,
    {
      kind: "server",
      code: isWaitOnReplica(message) ? "NOT_MASTER" : firstWord(message),
      reply: message,
      retryable: isTemporaryReply(message),
      mayHaveExecuted: isErrorInsideScript(message)
    },
    cause
  )

/** Node's socket error code on `error`, or "". */
export const errorCode = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""

/**
 * The failure of an error no client class explains: a socket error (retryable, the command may
 * have run), an abort (a timeout), or anything else (not retryable).
 */
export const otherFailure = (command: string, error: unknown): LockRedisError => {
  const message = error instanceof Error ? error.message : String(error)
  const code = errorCode(error)
  if (connectionCodes.has(code)) {
    return failure(command, { kind: "connection", code, reply: message, retryable: true, mayHaveExecuted: true }, error)
  }
  if (error instanceof Error && error.name === "AbortError") {
    return failure(
      command,
      { kind: "timeout", code: "ABORTED", reply: message, retryable: true, mayHaveExecuted: true },
      error
    )
  }
  return failure(
    command,
    { kind: "connection", code: code || "UNKNOWN", reply: message, retryable: false, mayHaveExecuted: true },
    error
  )
}
