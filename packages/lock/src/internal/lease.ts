// The `Lease` a locked call provides to its body: a view of the renewal scheduler's record of the
// lease (its `validUntil`), plus what the call learns (loss, release). One object per locked call,
// with its effects built only when read, so a body that never asks for its lease pays for one small
// object and the context entry.
import type * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Handle } from "../Lease.ts"
import type { Backend } from "../LockBackend.ts"
import { LockLost, type LockRedisError } from "../LockError.ts"
import type { Renewal, Renewals } from "./renewals.ts"
import { releaseTimeoutMillis } from "./settings.ts"
import { monotonicMillis, nowMillis } from "./time.ts"

export class LeaseHandle implements Handle {
  /** Set once the scheduler tracks the lease. */
  renewal: Renewal | undefined = undefined
  /** The loss that ended the lease, if it was lost. */
  lostWith: LockLost | undefined = undefined
  /** Set when the lease was released (the call or scope ended). */
  private released = false
  /** The error a read after release fails with, built on first use: errors cost ~15 us to build. */
  private releasedError: LockLost | undefined = undefined
  /** Created only when someone waits on `lost`. */
  private ended: Deferred.Deferred<never, LockLost> | undefined = undefined
  /** How many fibers are waiting on `lost` right now. */
  private watchers = 0
  /** Told of a loss as it is found (the scoped acquire's caller). */
  private onLoss: ((watched: boolean) => void) | undefined = undefined

  readonly key: string
  readonly namespace: string
  readonly fencingToken: number
  private readonly token: string
  private readonly backend: Backend
  private readonly renewals: Renewals
  /** The clock of the fiber that called the lock: the one the lease's validity is counted on. */
  private readonly clock: Clock.Clock

  constructor(
    key: string,
    namespace: string,
    fencingToken: number,
    token: string,
    backend: Backend,
    renewals: Renewals,
    clock: Clock.Clock
  ) {
    this.key = key
    this.namespace = namespace
    this.fencingToken = fencingToken
    this.token = token
    this.backend = backend
    this.renewals = renewals
    this.clock = clock
  }

  /** The error that ends the lease, once it has ended. */
  private get endedWith(): LockLost | undefined {
    return this.lostWith ?? (this.released ? this.releasedWith() : undefined)
  }

  private releasedWith(): LockLost {
    this.releasedError ??= new LockLost({
      key: this.key,
      namespace: this.namespace,
      phase: "release",
      reason: "released",
      bodyCompleted: true
    })
    return this.releasedError
  }

  /** Records a loss (from the renewal scheduler or a check); the first one wins. */
  lose(error: LockLost): void {
    if (this.endedWith !== undefined) return
    this.lostWith = error
    // Read before the watchers are resumed: a resumed watcher stops counting as one.
    const watched = this.watchers > 0
    if (this.ended !== undefined) Deferred.doneUnsafe(this.ended, Exit.fail(error))
    this.onLoss?.(watched)
  }

  /** Calls `f` when the lease is lost, telling it whether anyone was waiting on `lost`. */
  whenLost(f: (watched: boolean) => void): void {
    this.onLoss = f
  }

  /** Records that the call released the lease; returns the loss that ended it first, if any. */
  release(): LockLost | undefined {
    if (this.lostWith !== undefined || this.released) return this.lostWith
    this.released = true
    if (this.ended !== undefined) Deferred.doneUnsafe(this.ended, Exit.fail(this.releasedWith()))
    return undefined
  }

  private validUntil(): number {
    return this.endedWith === undefined && this.renewal !== undefined ? this.renewal.validUntil : -Infinity
  }

  get remaining(): Duration.Duration {
    return Duration.millis(Math.max(0, this.validUntil() - monotonicMillis(this.clock)))
  }

  get ensure(): Effect.Effect<void, LockLost> {
    return Effect.flatMap(nowMillis, (now) => {
      const ended = this.endedWith
      if (ended !== undefined) return Effect.fail(ended)
      if (now < this.validUntil()) return Effect.void
      // The scheduler reports the expiry when it wakes; a reader just before that sees it already.
      return Effect.fail(
        new LockLost({
          key: this.key,
          namespace: this.namespace,
          phase: "renew",
          reason: "expired",
          bodyCompleted: false
        })
      )
    })
  }

  get check(): Effect.Effect<void, LockLost | LockRedisError> {
    return Effect.flatMap(this.ensure, () =>
      Effect.flatMap(nowMillis, (now) => {
        const renewal = this.renewal!
        return Effect.flatMap(
          this.backend.check({
            key: this.key,
            token: this.token,
            leaseMillis: 0,
            timeoutMillis: Math.max(1, Math.min(releaseTimeoutMillis, renewal.validUntil - now)),
            acknowledge: false,
            permits: renewal.permits
          }),
          (held) => {
            if (held) return Effect.void
            // Reported as a failed renewal would be: the lease stops renewing and its call is told.
            this.renewals.lose(renewal, "ownership")
            return Effect.fail(
              this.endedWith ??
                new LockLost({
                  key: this.key,
                  namespace: this.namespace,
                  phase: "renew",
                  reason: "ownership",
                  bodyCompleted: false
                })
            )
          }
        )
      })
    )
  }

  get lost(): Effect.Effect<never, LockLost> {
    return Effect.suspend(() => {
      const ended = this.endedWith
      if (ended !== undefined) return Effect.fail(ended)
      this.ended ??= Deferred.makeUnsafe<never, LockLost>()
      this.watchers++
      return Effect.ensuring(
        Deferred.await(this.ended),
        Effect.sync(() => this.watchers--)
      )
    })
  }
}
