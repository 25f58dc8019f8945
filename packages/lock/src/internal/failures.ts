// What acquisition and renewal remember about the failures they retried, so that the TimedOut or
// LockLost a caller finally gets says why.
import { LockRedisError } from "../LockError.ts"

/** The failure recorded when an attempt got no reply before its own deadline. */
export const noReply = (command: "acquire" | "renew", millis: number): LockRedisError =>
  new LockRedisError({
    command,
    kind: "timeout",
    code: "TIMEOUT",
    reply: `no reply within the remaining ${Math.round(millis)} ms`,
    retryable: true,
    mayHaveExecuted: true
  })

/**
 * The failure worth reporting after `next`: a bare timeout says less than an earlier explained
 * failure (UNACKNOWLEDGED, LOADING, POOL_EXHAUSTED), so it never replaces one.
 */
export const moreInformative = (previous: LockRedisError | undefined, next: LockRedisError): LockRedisError =>
  next.kind !== "timeout" || previous === undefined || previous.kind === "timeout" ? next : previous
