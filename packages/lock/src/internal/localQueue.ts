// In-process turns: fibers of one lock client that want the same key queue here, first come first
// served, and only the fiber holding the key's turn goes to the server.
//
// Without it, fibers of one process poll the server against each other and the fiber that just
// released usually wins again (measured in docs/benchmarks-history.md). With it, in-process
// handover is immediate and fair, and the server sees one contender per process and key (which the
// server-side waiter queue then orders against other processes). Exclusion between processes is
// still the server's lock; this only orders the callers inside one client.
//
// A turn passes directly from its holder to the oldest waiter, so nobody (not even a `tryWithLock`)
// can slip in between. It may carry a grant: the lock itself, transferred at the server to a token
// made for the next fiber (see `transfer.ts`), which that fiber then holds without asking again. A
// turn's wait is part of the caller's budget: `waitTimeout` covers it, the wait is interruptible,
// and `tryWithLock` never waits for it. The uncontended path allocates one small record and touches
// one `Map`: no semaphore, no fiber.
import * as Effect from "effect/Effect"
import type { LockRedisError } from "../LockError.ts"

interface Waiter<G extends Grant> {
  /** Set when the turn was handed to this waiter; it then owns the turn and must pass it on. */
  handed: boolean
  /** Cancelled (timed out or interrupted) before being handed the turn. */
  gone: boolean
  /** What the previous holder handed over with the turn, which this waiter then owns. */
  grant: G | undefined
  resume: ((effect: Effect.Effect<void>) => void) | undefined
}

interface Turn<G extends Grant> {
  readonly waiters: Array<Waiter<G>>
  /** How many times in a row the turn went on with a grant while other clients waited. */
  streak: number
  /** What the turn-holder's acquisition is retrying, while its attempts fail without a reply. */
  unavailable: LockRedisError | undefined
}

/**
 * Hands the turn on before the holder's call ends, with a grant or without: `true` when a live
 * waiter took it. `false` when it was passed already, or when nobody waits: the turn is then free
 * and a grant stays the caller's to dispose of.
 */
export type PassTurn<G extends Grant> = (grant?: G) => boolean

/** What may come with a turn. `claimed` is set by the fiber that takes charge of it. */
export interface Grant {
  claimed: boolean
}

/** Runs an effect with the interruptibility of the caller of an uninterruptible region. */
export type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

export interface LocalQueue<G extends Grant> {
  /**
   * Runs `f` with the key's turn, waiting at most `budgetMillis` for it (`wait`) or not at all (`try`).
   * `f` is told whether it had to wait behind another fiber and what grant came with the turn, and
   * is given `passTurn`, which hands the turn on before `f` ends (at most once; the turn is passed
   * on, without a grant, when `f` ends otherwise). `onMissed` is built and run instead when the turn
   * was not had in time (or, for `try`, was taken): built only then, since it rarely runs.
   *
   * The turn is taken, and its passing on registered, in one uninterruptible step, so no
   * interruption can come between them and leave the key's turn taken forever. `f` is called in
   * that step and runs uninterruptibly too: it gets `restore` (the caller's interruptibility) for
   * the parts that may be interrupted. This saves it a mask of its own, on every lock call.
   */
  readonly withTurn: <A, E, R>(
    key: string,
    mode: "wait" | "try",
    budgetMillis: number,
    f: (waited: boolean, passTurn: PassTurn<G>, grant: G | undefined, restore: Restore) => Effect.Effect<A, E, R>,
    onMissed: () => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /** Whether any fiber holds or waits for the key's turn (tests). */
  readonly isBusy: (key: string) => boolean
  /** Whether some fiber waits for the key's turn (it will be the client's next contender). */
  readonly hasWaiters: (key: string) => boolean
  /** How many grants in a row went on while other clients waited (0 when the key has no turn). */
  readonly streak: (key: string) => number
  /** Records that streak (kept while any fiber of the client holds or waits for the key). */
  readonly setStreak: (key: string, streak: number) => void
  /**
   * The failure the fiber whose turn it is keeps retrying, while its acquisition's attempts fail
   * without the server answering (undefined once a reply came, or the turn passed on).
   */
  readonly unavailable: (key: string) => LockRedisError | undefined
  /** Records that failure, or its end (`undefined`), for the fiber whose turn it is. */
  readonly setUnavailable: (key: string, error: LockRedisError | undefined) => void
}

/**
 * `abandon` disposes of a grant that nobody can take: its fiber was interrupted after being handed
 * the turn, and no other fiber waits.
 */
export const make = <G extends Grant>(abandon: (key: string, grant: G) => Effect.Effect<void>): LocalQueue<G> => {
  const turns = new Map<string, Turn<G>>()

  /** Hands the turn (and `grant`) to the oldest live waiter, or frees it: `true` when handed. */
  const pass = (key: string, turn: Turn<G>, grant: G | undefined): boolean => {
    let next = turn.waiters.shift()
    while (next !== undefined && next.gone) next = turn.waiters.shift()
    if (next === undefined) {
      turns.delete(key)
      return false
    }
    next.handed = true
    next.grant = grant
    turn.unavailable = undefined
    const resume = next.resume
    next.resume = undefined
    resume?.(Effect.void)
    return true
  }

  /**
   * Hands the turn on after its fiber was interrupted before taking charge of `grant`: the grant
   * goes with the turn, or, when nobody waits, is disposed of.
   */
  const passOrAbandon = (key: string, grant: G | undefined, passGrant: (grant: G | undefined) => boolean) =>
    passGrant(grant) || grant === undefined ? Effect.void : abandon(key, grant)

  /** `pass`, once: the holder may hand the turn on early, and it is passed on at the end regardless. */
  const passOnce = (key: string, turn: Turn<G>): PassTurn<G> => {
    let passed = false
    return (grant) => {
      if (passed) return false
      passed = true
      return pass(key, turn, grant)
    }
  }

  /** Waits to be handed the turn: `true` when it was (the caller then owns it), `false` on timeout. */
  const wait = (key: string, turn: Turn<G>, budgetMillis: number, waiter: Waiter<G>): Effect.Effect<boolean> => {
    turn.waiters.push(waiter)
    return Effect.callback<void>((resume) => {
      if (waiter.handed) return resume(Effect.void)
      waiter.resume = resume
    }).pipe(
      Effect.timeoutOption(Math.max(0, budgetMillis)),
      // Handed the turn just as the budget ran out: it is ours all the same (and passed on after).
      Effect.map(() => waiter.handed),
      Effect.onExit((exit) => {
        waiter.resume = undefined
        if (!waiter.handed) {
          waiter.gone = true
          return Effect.void
        }
        if (exit._tag === "Success") return Effect.void
        // Interrupted once handed the turn: it goes on, grant and all, or the grant is disposed of.
        const grant = waiter.grant
        waiter.grant = undefined
        return passOrAbandon(key, grant, (grant) => pass(key, turn, grant))
      })
    )
  }

  return {
    withTurn: (key, mode, budgetMillis, f, onMissed) =>
      Effect.uninterruptibleMask((restore) => {
        const turn = turns.get(key)
        if (turn === undefined) {
          // The key's turn is free: taken now, and passed on when `f` ends, however it ends.
          const mine: Turn<G> = { waiters: [], streak: 0, unavailable: undefined }
          turns.set(key, mine)
          const passTurn = passOnce(key, mine)
          // `f` is built inside `suspend`: a frame keeps the effect it wraps for as long as it is on
          // the stack, which here is the whole call, so an effect built out here would keep the
          // acquisition alive while the body runs (it was 2.4 KB a held lock when measured).
          // `onExitPrimitive`: a finalizer that answers `undefined` lets the exit pass straight on,
          // three Effect steps fewer per call than `onExit` and its `Effect.void`.
          return Effect.onExitPrimitive(
            Effect.suspend(() => f(false, passTurn, undefined, restore)),
            () => {
              passTurn()
              return undefined
            }
          )
        }
        if (mode === "try") return restore(onMissed())
        const waiter: Waiter<G> = { handed: false, gone: false, grant: undefined, resume: undefined }
        return Effect.flatMap(restore(wait(key, turn, budgetMillis, waiter)), (had) => {
          if (!had) return restore(onMissed())
          const passTurn = passOnce(key, turn)
          const grant = waiter.grant
          waiter.grant = undefined
          // `f` inside `suspend` for the same reason as above.
          if (grant === undefined) {
            return Effect.ensuring(
              Effect.suspend(() => f(true, passTurn, grant, restore)),
              Effect.sync(passTurn)
            )
          }
          // Ended before `f` claimed the grant: it goes on with the turn, or is disposed of.
          return Effect.ensuring(
            Effect.suspend(() => f(true, passTurn, grant, restore)),
            Effect.suspend(() => (grant.claimed ? Effect.sync(passTurn) : passOrAbandon(key, grant, passTurn)))
          )
        })
      }),
    isBusy: (key) => turns.has(key),
    hasWaiters: (key) => turns.get(key)?.waiters.some((waiter) => !waiter.gone) ?? false,
    streak: (key) => turns.get(key)?.streak ?? 0,
    setStreak: (key, streak) => {
      const turn = turns.get(key)
      if (turn !== undefined) turn.streak = streak
    },
    unavailable: (key) => turns.get(key)?.unavailable,
    setUnavailable: (key, error) => {
      const turn = turns.get(key)
      if (turn !== undefined) turn.unavailable = error
    }
  }
}
