// When a failed operation on a replicated deployment means the client's view of the topology is
// probably out of date, so that it should be re-read before the next attempt.
import type { LockRedisError } from "@sage/lock/LockError"

/** Replies after which the view is probably stale: the node is no longer (or not yet) the key's master. */
const staleReplies: ReadonlySet<string> = new Set([
  "MOVED",
  "ASK",
  "READONLY",
  "NOT_MASTER",
  "CLUSTERDOWN",
  "MASTERDOWN",
  "TRYAGAIN",
  "UNBLOCKED"
])

/**
 * Whether `error` suggests re-reading the topology: a reply saying the node does not serve the key
 * as master, or a failure to reach the node at all (connection, timeout), which may have died.
 */
export const suggestsStaleView = (error: LockRedisError): boolean =>
  staleReplies.has(error.code) || error.kind !== "server"
