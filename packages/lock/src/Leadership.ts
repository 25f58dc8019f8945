/**
 * What a leader holds while it leads an election (`Election.campaign`): its term, its lease, and the
 * ways to proclaim, resign and run work that stops with the lead.
 *
 * @since 0.2.1
 */
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { Handle } from "./Lease.ts"
import type { InvalidArgument, LockLost, LockRedisError } from "./LockError.ts"

/**
 * A lead held by a scope (see `Election.campaign`).
 *
 * @category models
 * @since 0.2.1
 */
export interface Leadership {
  /** The election's name. */
  readonly name: string
  /** The id this leader campaigned with. */
  readonly candidate: string
  /** The term: the grant's fencing token, higher than every earlier leader's of this election. */
  readonly term: number
  /** The lease under the lead: `remaining`, `ensure`, `check`, `lost`, as for a lock. */
  readonly lease: Handle
  /** What this leader proclaimed last. */
  readonly value: Effect.Effect<string>
  /**
   * Updates what observers see, in the same term (its `revision` goes up). Fails with `LockLost`
   * when this term no longer leads.
   */
  readonly proclaim: (value: string) => Effect.Effect<void, LockLost | LockRedisError | InvalidArgument>
  /**
   * Steps down now: the lock is released (the next candidate in line takes over at once) and
   * observers are told; the scope stays open. Does nothing the second time.
   */
  readonly resign: Effect.Effect<void>
  /** Completes when the lead ends by `resign` or the scope's close; fails with `LockLost` when it is lost. */
  readonly ended: Effect.Effect<void, LockLost>
  /**
   * Runs `work` while leading: `Some(result)` when it completes first and the lead is confirmed
   * then (the lease still valid, and the lock still this lead's at the server); `None` when the
   * leader resigns first (the work is interrupted); `LockLost` when the lead is lost first (the work
   * is interrupted) or is found lost when the work completes (`bodyCompleted: true`: it ran, perhaps
   * in part, without the lead, as after a pause longer than the lease).
   */
  readonly lead: <A, E, R>(work: Effect.Effect<A, E, R>) => Effect.Effect<Option.Option<A>, E | LockLost, R>
}
