/**
 * The typed failures of `@sage/lock`.
 *
 * Every failure a caller can see is one of four tagged, yieldable errors, matched with
 * `Effect.catchTag` (never by message text):
 *
 * - `TimedOut`: the lock was not acquired within the caller's budget; the body never started.
 * - `LockLost`: ownership ended while (or right after) the body ran; the body was interrupted, or it
 *   had completed but its lease was found gone at release.
 * - `InvalidArgument`: an option or key was rejected before any server was contacted.
 * - `LockRedisError`: the server or the connection failed in a way that retrying cannot fix
 *   (for example `NOPERM`, `WRONGPASS`, `OOM`), or a retryable failure surfaced through a backend.
 *
 * `LockRedisError` is not Effect's `RedisError` (`effect/persistence/Redis`, tag `"RedisError"`):
 * that one carries only a `cause`, while the lock needs to know whether a failure is retryable and
 * whether the command may have run. The distinct tag keeps `catchTag("RedisError")` (Effect's) and
 * `catchTag("LockRedisError")` (the lock's) apart in an app that uses both.
 *
 * Body failures are never wrapped: the body's own `E` passes through untouched.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Acquisition gave up: the lock stayed busy, or the deployment stayed unavailable, until the budget
 * (`waitTimeout` for `withLock`, about one second for `tryWithLock`) ran out. The body did not run.
 *
 * **Details**
 * `reason` is `"busy"` when the last attempt found another holder, `"unavailable"` when the last
 * attempt failed with a retryable server or connection error (kept in `lastError`), and
 * `"unacknowledged"` when replicas did not confirm the write in time (replicated deployments).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * const job = Effect.log("working").pipe(
 *   Lock.withLock("nightly", { waitTimeout: "2 seconds" }),
 *   Effect.catchTag("TimedOut", (e) => Effect.logWarning(`still busy after ${e.waitedMillis} ms`))
 * )
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class TimedOut extends Schema.TaggedError<TimedOut>()("TimedOut", {
  /** The Redis key of the lock (`<namespace>:{<encoded key>}`). */
  key: Schema.String,
  namespace: Schema.String,
  /** How long the caller waited, in milliseconds, measured with Effect's `Clock`. */
  waitedMillis: Schema.Number,
  /** How many acquisition attempts were sent. */
  attempts: Schema.Number,
  reason: Schema.Literals(["busy", "unavailable", "unacknowledged"]),
  /** The last retryable failure seen, when `reason` is not `"busy"`. */
  lastError: Schema.optional(Schema.Defect())
}) {
  override get message(): string {
    return `could not acquire lock ${this.key} within ${this.waitedMillis} ms after ${this.attempts} attempt(s): ${this.reason}`
  }
}

/**
 * Ownership of the lock ended, or could not be confirmed, while the caller relied on it.
 *
 * **Details**
 * - `phase: "acquire"`: the lock was granted but its usable lease was already spent, or the granting
 *   node was not the master, before the body could start. The body did not run.
 * - `phase: "renew"`: renewal found another owner or no key (`reason: "ownership"`), or could not
 *   reach the server before the usable lease ran out (`reason: "expired"`). The body was interrupted
 *   and its finalizers ran before this error was raised.
 * - `phase: "release"`: the body completed (`bodyCompleted: true`) but at release the key no longer
 *   held this caller's token: another process may have run concurrently for part of the body.
 * - `reason: "released"` (with `phase: "release"`): only from a `Lease` read after its lock call or
 *   scope ended (`ensure`, `lost`): the lease was released and can no longer be relied on.
 *
 * **Gotchas**
 * Interruption is cooperative: work that already happened is not undone, and an uninterruptible
 * region in the body delays the stop.
 *
 * @category errors
 * @since 0.1.0
 */
export class LockLost extends Schema.TaggedError<LockLost>()("LockLost", {
  key: Schema.String,
  namespace: Schema.String,
  phase: Schema.Literals(["acquire", "renew", "release"]),
  reason: Schema.Literals(["ownership", "expired", "not-master", "failed", "released"]),
  /** Whether the body ran to completion before the loss was detected. */
  bodyCompleted: Schema.Boolean,
  /** The failure that made renewal give up, when there was one. */
  cause: Schema.optional(Schema.Defect())
}) {
  override get message(): string {
    const body = this.bodyCompleted ? "the body had completed" : "the body was stopped"
    return `lost lock ${this.key} during ${this.phase} (${this.reason}); ${body}`
  }
}

/**
 * An option, duration or key was rejected. Raised when a layer is built (bad options) or when a call
 * is made (bad key or `waitTimeout`), before any server is contacted.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * // fails the layer: InvalidArgument { field: "leaseDuration", value: "10 millis", ... }
 * const bad = Lock.layer({ leaseDuration: "10 millis" })
 * ```
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", {
  /** The option or argument that was rejected, e.g. `"leaseDuration"`, `"waitTimeout"`, `"key"`. */
  field: Schema.String,
  /** A printable rendering of the rejected value. */
  value: Schema.String,
  /** Why it was rejected. */
  reason: Schema.String
}) {
  override get message(): string {
    return `invalid ${this.field} (${this.value}): ${this.reason}`
  }
}

/**
 * A server or connection failure, classified once by the backend.
 *
 * **Details**
 * - `kind`: `"connection"` (refused, reset, closed, offline), `"timeout"` (no reply in time),
 *   `"server"` (an error reply such as `NOPERM`, `BUSY`, `LOADING`).
 * - `code`: the reply's first word (`"NOPERM"`, `"LOADING"`, ...), or the socket error code.
 * - `retryable`: whether the lock may retry it within its budget. The lock never retries a
 *   non-retryable error; it fails the call with it.
 * - `mayHaveExecuted`: the command may have run on the server even though no reply arrived.
 *
 * **Gotchas**
 * The tag is `"LockRedisError"`, not `"RedisError"`: Effect's own `RedisError`
 * (`effect/persistence/Redis`, e.g. from `NodeRedis.layer`) keeps that tag, and the two never mix.
 * A backend over Effect's `Redis` service wraps Effect's error as this one's `cause`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lock } from "@sage/lock"
 *
 * const job = Effect.log("working").pipe(
 *   Lock.withLock("nightly", { waitTimeout: "2 seconds" }),
 *   Effect.catchTag("LockRedisError", (e) => Effect.logError(`redis refused: ${e.code}`))
 * )
 * ```
 *
 * @category errors
 * @since 0.2.0
 */
export class LockRedisError extends Schema.TaggedError<LockRedisError>()("LockRedisError", {
  command: Schema.String,
  kind: Schema.Literals(["connection", "timeout", "server"]),
  code: Schema.String,
  reply: Schema.String,
  retryable: Schema.Boolean,
  mayHaveExecuted: Schema.Boolean,
  cause: Schema.optional(Schema.Defect())
}) {
  override get message(): string {
    return `${this.command}: ${this.reply}`
  }
}

/**
 * The former name of `LockRedisError`, kept so existing imports compile; its tag is
 * `"LockRedisError"` too.
 *
 * @deprecated Use `LockRedisError`.
 * @category errors
 * @since 0.1.0
 */
export const RedisError: typeof LockRedisError = LockRedisError

/**
 * The former name of `LockRedisError`.
 *
 * @deprecated Use `LockRedisError`.
 * @category errors
 * @since 0.1.0
 */
export type RedisError = LockRedisError

/**
 * Everything `withLock` can add to the body's own error type.
 *
 * @category errors
 * @since 0.1.0
 */
export type LockError = TimedOut | LockLost | InvalidArgument | LockRedisError
