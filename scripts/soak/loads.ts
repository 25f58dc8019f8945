// The two loads a soak worker runs on its lock client, until told to stop:
// - contend: many waiters loop `withLock` on ONE key around a short body, each with a `waitTimeout`,
//   so most calls time out and go round again: the local queue, the server's waiter queue, wake-ups
//   and the give-up path all run tens of thousands of times;
// - hold: every fiber holds a lock of its own for the whole run (the body sleeps), so the renewal
//   scheduler keeps thousands of leases alive in batches.
// Each call's outcome is counted; nothing is recorded per call, so the heap only holds what the lock
// itself keeps.
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Semaphore from "effect/Semaphore"
import type { Lock } from "@sage/lock"
import type { Counts, Load } from "./protocol.ts"

/** Ends a load: its loops stop starting calls, and held bodies return. */
export interface Stop {
  readonly signal: Deferred.Deferred<void>
  readonly stopping: () => boolean
}

export const makeStop = (): Stop => {
  const signal = Deferred.makeUnsafe<void>()
  return { signal, stopping: () => Deferred.isDoneUnsafe(signal) }
}

interface Tally {
  calls: number
  acquisitions: number
  timedOut: number
  lockLost: number
  overlaps: number
  inBody: number
  allHeldAt: number
  readonly lockLostBy: Record<string, number>
  readonly otherErrors: Record<string, number>
}

export interface Running {
  /** Bodies running now. */
  readonly inBody: () => number
  /** Past the ramp-up: every lock held or given up on (hold); at once (contend). */
  readonly ramped: () => boolean
  /** Runs the load until `stop`, then returns once every call has returned. */
  readonly run: Effect.Effect<Counts>
}

const count = (tally: Tally, exit: Exit.Exit<unknown, { readonly _tag: string }>): void => {
  tally.calls++
  if (Exit.isSuccess(exit)) return
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "None") {
    const what = Cause.hasInterruptsOnly(exit.cause)
      ? "interrupted"
      : `defect: ${Cause.pretty(exit.cause).split("\n")[0] ?? ""}`
    tally.otherErrors[what] = (tally.otherErrors[what] ?? 0) + 1
    return
  }
  const tag = error.value._tag
  if (tag === "TimedOut") tally.timedOut++
  else if (tag === "LockLost") {
    tally.lockLost++
    const { phase, reason } = error.value as { readonly phase?: string; readonly reason?: string }
    tally.lockLostBy[`${phase}/${reason}`] = (tally.lockLostBy[`${phase}/${reason}`] ?? 0) + 1
  } else tally.otherErrors[tag] = (tally.otherErrors[tag] ?? 0) + 1
}

const between = (min: number, max: number): number => min + Math.floor(Math.random() * (max - min + 1))

const contend = (
  lock: Lock.LockClient<string>,
  load: Extract<Load, { _tag: "contend" }>,
  stop: Stop,
  tally: Tally
): Effect.Effect<void> => {
  // Counted on entry: a second body inside this process at once means the local queue let two in.
  const body = Effect.suspend(() => {
    tally.acquisitions++
    if (tally.inBody > 0) tally.overlaps++
    tally.inBody++
    return Effect.sleep(between(load.bodyMinMillis, load.bodyMaxMillis))
  }).pipe(Effect.ensuring(Effect.sync(() => tally.inBody--)))
  const call = lock.withLock(load.key, { waitTimeout: load.waitTimeoutMillis })(body)
  const waiter = Effect.gen(function* () {
    while (!stop.stopping()) {
      count(tally, yield* Effect.exit(call))
      // A short pause outside the lock, so a waiter that just gave up does not spin.
      yield* Effect.sleep(between(0, 10))
    }
  })
  return Effect.forEach(Array.from({ length: load.waiters }), () => waiter, {
    concurrency: "unbounded",
    discard: true
  })
}

const hold = Effect.fnUntraced(function* (
  lock: Lock.LockClient<string>,
  load: Extract<Load, { _tag: "hold" }>,
  stop: Stop,
  tally: Tally,
  startedAt: number
) {
  // Acquisitions in flight are bounded, as when locks are taken as work arrives: a lease counts from
  // its acquire request's send time, so one burst of thousands queued behind each other in one
  // process can spend a short lease before its replies are read (see the `--burst` finding, docs/soak.md).
  const permits = yield* Semaphore.make(load.acquireConcurrency > 0 ? load.acquireConcurrency : load.locks)
  const body = (release: Effect.Effect<void>) =>
    Effect.suspend(() => {
      tally.acquisitions++
      tally.inBody++
      if (tally.inBody === load.locks) tally.allHeldAt = performance.now() - startedAt
      return Effect.andThen(release, Deferred.await(stop.signal))
    }).pipe(Effect.ensuring(Effect.sync(() => tally.inBody--)))
  yield* Effect.forEach(
    Array.from({ length: load.locks }, (_, i) => i),
    (i) =>
      Effect.gen(function* () {
        yield* permits.take(1)
        let released = false
        const release = Effect.suspend(() => {
          if (released) return Effect.void
          released = true
          return permits.release(1)
        })
        const exit = yield* Effect.exit(
          lock.withLock(`held-${i}`, { waitTimeout: load.waitTimeoutMillis })(body(release))
        )
        yield* release
        count(tally, exit)
      }),
    { concurrency: "unbounded", discard: true }
  )
})

export const make = (lock: Lock.LockClient<string>, load: Load, stop: Stop): Running => {
  const tally: Tally = {
    calls: 0,
    acquisitions: 0,
    timedOut: 0,
    lockLost: 0,
    overlaps: 0,
    inBody: 0,
    allHeldAt: -1,
    lockLostBy: {},
    otherErrors: {}
  }
  return {
    inBody: () => tally.inBody,
    ramped: () => load._tag === "contend" || tally.allHeldAt >= 0 || tally.calls >= load.locks,
    run: Effect.suspend(() => {
      const startedAt = performance.now()
      const running =
        load._tag === "contend" ? contend(lock, load, stop, tally) : hold(lock, load, stop, tally, startedAt)
      return Effect.andThen(
        running,
        Effect.sync((): Counts => ({
          calls: tally.calls,
          acquisitions: tally.acquisitions,
          timedOut: tally.timedOut,
          lockLost: tally.lockLost,
          lockLostBy: { ...tally.lockLostBy },
          otherErrors: { ...tally.otherErrors },
          overlaps: tally.overlaps,
          allHeldAfterMillis: Math.round(tally.allHeldAt)
        }))
      )
    })
  }
}
