// What a fault scenario is: the fault, the deployments it applies to, the verdict it is expected to
// earn, and the context its injection acts on (the deployment, the worker processes as the parent
// sees them). The scenarios themselves are listed in scenarios.ts.
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { TestkitError } from "@sage/lock-testkit"
import type { Deployment, DeploymentKind, DeploymentOptions } from "./deployments.ts"

/** A worker process as the parent sees it from its lines, at one moment. */
export interface WorkerView {
  readonly worker: number
  /** Neither killed nor exited. */
  readonly alive: boolean
  /** Calls under way whose body has not entered: their Redis key and when they began (monotonic µs). */
  readonly waiting: ReadonlyArray<{ readonly call: string; readonly redisKey: string; readonly since: number }>
  /** Bodies inside now: their Redis key, entry (monotonic µs) and planned length. */
  readonly inBody: ReadonlyArray<{
    readonly call: string
    readonly redisKey: string
    readonly enteredAt: number
    readonly bodyMillis: number
  }>
}

/** A body that entered right after another body on its key left. */
export interface HandOff {
  readonly worker: number
  readonly call: string
  readonly redisKey: string
  /** When the body entered (monotonic µs). */
  readonly enteredAt: number
  /** The worker whose body had just left the key. */
  readonly fromWorker: number
  /** From that body's exit to this one's entry, on the shared monotonic clock. */
  readonly gapMillis: number
}

export interface FaultContext {
  readonly deployment: Deployment
  readonly leaseMillis: number
  /** The full Redis keys of the locks the workers contend on; faults aim at the first. */
  readonly redisKeys: ReadonlyArray<string>
  /** SIGSTOP worker `worker` for `millis`, then SIGCONT (recorded for the checker). */
  readonly pauseWorker: (worker: number, millis: number) => Effect.Effect<void>
  /** SIGKILL worker `worker` (recorded for the checker). */
  readonly killWorker: (worker: number) => Effect.Effect<void>
  /**
   * Waits until some worker is inside a lock body at least `minBodyMillis` long; returns the worker's
   * number and the Redis key it holds.
   */
  readonly holderWorker: (
    minBodyMillis?: number
  ) => Effect.Effect<{ readonly worker: number; readonly redisKey: string }>
  /** The length of the long bodies (which span renewals). */
  readonly longBodyMillis: number
  /** Every worker process now. */
  readonly workers: Effect.Effect<ReadonlyArray<WorkerView>>
  /**
   * Waits for the next body that enters within `withinMillis` of the previous body on its key leaving,
   * in the same worker (`sameWorker: true`), another one (`false`) or either; returns it as soon as
   * the parent has read both lines.
   */
  readonly nextHandOff: (options: {
    readonly withinMillis: number
    readonly sameWorker?: boolean | undefined
  }) => Effect.Effect<HandOff>
  /** Fails the cell with `problem` (what the fault showed, not a harness failure). */
  readonly fail: (problem: string) => Effect.Effect<void>
  /** Records a figure the fault produced, printed with the cell's result. */
  readonly note: (text: string) => Effect.Effect<void>
}

export type Expectation = "exclusion" | "violation"

export interface Scenario {
  readonly id: string
  /** What is done, in a few words (shown in the report). */
  readonly fault: string
  readonly deployments: ReadonlyArray<DeploymentKind>
  readonly expect: Expectation
  /**
   * The workers loop `Semaphore.withPermits` (the run's limit, 1 or 2 permits a call) instead of
   * `withLock`: "exclusion" then means never more permits held on a key than its limit.
   */
  readonly semaphore?: boolean | undefined
  /**
   * The workers campaign for the keys as election names instead (`Election.campaign`, `lead(body)`,
   * `resign`; the body's token is the term), and an observer per key in each worker writes what
   * `Election.observe` shows: "exclusion" then means never two leaders' bodies at once, and the
   * observers' order is checked whatever the expectation.
   */
  readonly election?: boolean | undefined
  /** Why that verdict (shown in the report). */
  readonly why: string
  /** At least one LockLost must be seen (the fault takes a held lock or permit away). */
  readonly lockLostRequired?: boolean | undefined
  /** LockRedisError codes the fault is expected to cause (anything else is unexpected). */
  readonly expectedErrorCodes?: ReadonlyArray<string> | undefined
  readonly deploymentOptions?: DeploymentOptions | undefined
  /** Worker processes, when the fault needs more than the run's default. */
  readonly workers?: number | undefined
  /**
   * The longest a free key may keep live waiters waiting (the checker's idle figure), for the run's
   * lease, when the scenario promises prompt hand-offs; unset, the figure is only reported.
   */
  readonly idleBoundMillis?: ((leaseMillis: number) => number) | undefined
  readonly inject: (context: FaultContext) => Effect.Effect<void, TestkitError.TestkitError, Scope.Scope>
}
