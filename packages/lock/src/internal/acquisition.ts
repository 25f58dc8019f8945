// What an acquisition is given and what it answers (acquire.ts runs it): the held lease, the outcome,
// the parameters of one call's acquisition and the call it reports to.
import type * as Clock from "effect/Clock"
import type * as Exit from "effect/Exit"
import type { Backend, Permits } from "../LockBackend.ts"
import type { LockRedisError } from "../LockError.ts"
import type { AttemptSlots } from "./attemptSlots.ts"
import type { Settings } from "./settings.ts"
import type { CallTrace } from "./tracing.ts"

/** A lock the caller holds: where, with which token, and when the request that granted it was sent. */
export interface HeldLease {
  readonly key: string
  readonly token: string
  /** Monotonic time (ms) at which the granting request was sent: the usable lease counts from it. */
  readonly sentAt: number
  /** The grant's fencing token. */
  readonly fence: number
  /**
   * The lease the key was granted with, when not the lock's own: a release's grant lasts its claim
   * window, and the first renewal sets the lock's lease.
   */
  readonly leaseMillis?: number | undefined
}

export type AcquireOutcome = { readonly _tag: "Held"; readonly lease: HeldLease } | { readonly _tag: "Busy" }

export interface AcquireParams {
  readonly backend: Backend
  readonly settings: Settings
  readonly key: string
  readonly token: string
  /** Monotonic time (ms) of the call: `TimedOut.waitedMillis` counts from here. */
  readonly startedAt: number
  /** The deadline (monotonic ms) for the whole acquisition. */
  readonly deadline: number
  /** `wait` retries a busy lock until the deadline; `try` returns `Busy` at once. */
  readonly mode: "wait" | "try"
  /** The caller already waited behind another fiber of its client: the key was busy all along. */
  readonly waitedBehind: boolean
  /**
   * The key may already hold `token` (a transfer to it whose outcome is unknown): an attempt
   * settles it, and giving up releases it.
   */
  readonly uncertain?: boolean | undefined
  /**
   * The client's waiter id, in `wait` mode over a backend with wake-ups: busy replies register it at
   * the server, and releases wake it.
   */
  readonly waiterId?: string | undefined
  /** A semaphore's permits: the acquisition asks for them rather than for a lock. */
  readonly permits?: Permits | undefined
  /**
   * The fence of a grant this client held on the key and could not release (staleGrants.ts): an
   * attempt answered with it took that grant again, and must release it and ask anew.
   */
  readonly staleFence?: number | undefined
  /** The call that acquires: asked whether a successor inherits its registration, told how it ended. */
  readonly caller: Caller
  /**
   * Told the failure its attempts keep retrying while the server does not answer, and `undefined`
   * once it answers or the acquisition ends (for `tryWithLock` calls of the same client, which must
   * not read an outage as "busy").
   */
  readonly unavailable?: ((key: string, error: LockRedisError | undefined) => void) | undefined
  /**
   * The client's slots for attempts on the wire: each attempt holds one from its send to its reply
   * (or the acquisition's end), and waits for one when all are taken.
   */
  readonly slots?: AttemptSlots | undefined
  /** The call's span, when traced: attempts and waits are recorded on it. */
  readonly trace?: CallTrace | undefined
  /** The clock of the calling fiber, read directly on the hot path (an Effect step per read costs). */
  readonly clock: Clock.Clock
}

/**
 * The call an acquisition is for. An object with methods rather than callbacks in the parameters:
 * no closure is made for it per call (see `locked.ts`).
 */
export interface Caller {
  /** Whether another fiber of the client waits for this key (it inherits the server registration). */
  readonly hasSuccessor: () => boolean
  /** Told how the acquisition ended, and when (monotonic ms). */
  readonly settled: (exit: Exit.Exit<AcquireOutcome, unknown>, end: number) => void
}
