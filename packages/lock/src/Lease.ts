/**
 * The lease a lock call holds, as a service the body can ask for.
 *
 * `withLock` and `tryWithLock` provide `Lease` to their body, and `Lock.acquire` returns it, so code
 * that runs under a lock can see which lock it holds, its fencing token, how long the lease can
 * still be relied on, and whether the server still agrees. A body that does not ask for it is
 * unchanged: `Lease` is removed from the body's requirements.
 *
 * It does not make a lock safer by itself: a check can be out of date by the time the next write
 * lands. The fencing token, checked by the resource that receives the writes, is what stops a stale
 * holder (see `docs/fencing.md`).
 *
 * @since 0.2.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type { LockLost, LockRedisError } from "./LockError.ts"

/**
 * What a held lease exposes. Every effect reads the lease's state when it runs, so a lease read after
 * loss or release shows it.
 *
 * @category models
 * @since 0.2.0
 */
export interface Handle {
  /** The lock's Redis key, `<namespace>:{<encoded key>}`. */
  readonly key: string
  /** The lock client's namespace. */
  readonly namespace: string
  /**
   * The fencing token of this acquisition: an integer (below 2^53) greater than every token issued
   * for this key before, by any client; unchanged while the lease is renewed. See `docs/fencing.md`
   * for what is guaranteed and when it is not.
   */
  readonly fencingToken: number
  /**
   * How long the lease can still be relied on, read when the property is read: the usable lease
   * counted from the send time of the last request that granted or renewed it, on the clock of the
   * fiber that called the lock (so `TestClock` moves it). Zero once the lease is lost or released.
   * A plain value like `fencingToken`, so it reads well in a log line (`1234 millis`).
   *
   * @since 0.2.0
   */
  readonly remaining: Duration.Duration
  /**
   * Succeeds while the lease can be relied on; fails with `LockLost` once it was lost, its usable
   * lease ran out, or it was released (`reason: "released"`). Local: no round trip. Run it right
   * before a side effect that must not happen without the lock.
   */
  readonly ensure: Effect.Effect<void, LockLost>
  /**
   * Asks the server whether the lock key still holds this lease's token: one round trip, on the
   * key's master, within one second and never past the usable lease, not retried. Succeeds when it
   * does; fails with `LockLost` when it does not, or when the lease already ended (then without a
   * round trip), and with `LockRedisError` when the server cannot answer.
   *
   * **Details**
   * A "not held" answer is a loss, reported as a failed renewal would report it: the lease stops
   * renewing, the body of `withLock` is interrupted and the call fails with `LockLost`.
   */
  readonly check: Effect.Effect<void, LockLost | LockRedisError>
  /**
   * Waits until the lease ends and fails with the `LockLost` that ended it (a loss, or
   * `reason: "released"` after a release). Never succeeds. Race it against work that must stop when
   * the lock goes, e.g. after `Lock.acquire`.
   */
  readonly lost: Effect.Effect<never, LockLost>
}

/**
 * The lease of the lock call the current code runs under.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Lease, Lock } from "@sage/lock"
 *
 * const transfer = Effect.gen(function* () {
 *   const lease = yield* Lease.Lease
 *   yield* lease.ensure
 *   yield* Effect.log(`writing with fencing token ${lease.fencingToken}`)
 * }).pipe(Lock.withLock("account:42", { waitTimeout: "2 seconds" }))
 * // transfer: Effect<void, LockError, Lock>: the body's Lease requirement is met by withLock
 * ```
 *
 * @category services
 * @since 0.2.0
 */
export class Lease extends Context.Service<Lease, Handle>()("@sage/lock/Lease") {}

/**
 * The fencing token of the current lease.
 *
 * @category accessors
 * @since 0.2.0
 */
export const fencingToken: Effect.Effect<number, never, Lease> = Lease.useSync((lease) => lease.fencingToken)
