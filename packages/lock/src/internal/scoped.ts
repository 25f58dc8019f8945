// `Lock.acquire`: a lock held by a Scope rather than by one body. A fiber of the scope runs
// `withLock` with a body that hands the lease over and waits, so acquisition, renewal, loss and the
// bounded release are withLock's own machinery; closing the scope interrupts that body.
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import { type Handle, Lease } from "../Lease.ts"
import type { LockError } from "../LockError.ts"
import type { LeaseHandle } from "./lease.ts"
import type { Warnings } from "./warnings.ts"

type WithLock = <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E | LockError, Exclude<R, Lease>>

/**
 * Holds the lock `withLock` takes until the caller's scope closes and returns its lease. A loss
 * interrupts the waiting body (the holder fiber ends with LockLost, which is logged) and, unless
 * something waits on `lease.lost` or `interruptOnLoss` is false, the fiber that called, at once.
 */
export const acquireScoped = (
  withLock: WithLock,
  interruptOnLoss: boolean,
  warnings: Warnings
): Effect.Effect<Handle, LockError, Scope.Scope> =>
  Effect.withFiber((caller) =>
    Effect.suspend(() => {
      const ready = Deferred.makeUnsafe<Handle, LockError>()
      let handed: LeaseHandle | undefined
      const handOver = Lease.use((lease) =>
        Effect.andThen(
          Effect.sync(() => {
            handed = lease as LeaseHandle
            if (interruptOnLoss) handed.whenLost((watched) => watched || caller.interruptUnsafe())
            Deferred.doneUnsafe(ready, Exit.succeed(lease))
          }),
          Effect.never
        )
      )
      const holder = Effect.onExit(withLock(handOver), (exit) => {
        if (Exit.isSuccess(exit)) return Effect.void
        // Not acquired (or the scope closed first): the caller gets the failure or interruption.
        if (handed === undefined) return Effect.sync(() => Deferred.doneUnsafe(ready, Exit.failCause(exit.cause)))
        if (Cause.hasInterruptsOnly(exit.cause)) return Effect.void
        return warnings.warn(
          "scopeLost",
          handed.key,
          `lock ${handed.key} held by a scope was lost before the scope closed`,
          exit.cause
        )
      })
      return Effect.flatMap(Effect.forkScoped(holder, { startImmediately: true }), (fiber) =>
        // Interrupted while waiting: stop the holder now rather than when the scope closes.
        Effect.onInterrupt(Deferred.await(ready), () => Fiber.interrupt(fiber))
      )
    })
  )
