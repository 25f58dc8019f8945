// In-process turns: fibers of one lock client that want the same key queue here, first come first
// served, and only the fiber holding the key's turn goes to the server.
//
// Without it, fibers of one process poll the server against each other and the fiber that just
// released usually wins again (measured in docs/benchmarks.md). With it, in-process handover is
// immediate and fair, and the server sees one contender per process and key (which the server-side
// waiter queue then orders against other processes). Exclusion between processes is still the
// server's lock; this only orders the callers inside one client.
//
// A turn passes directly from its holder to the oldest waiter, so nobody (not even a `tryWithLock`)
// can slip in between. A turn's wait is part of the caller's budget: `waitTimeout` covers it, the
// wait is interruptible, and `tryWithLock` never waits for it. The uncontended path allocates one
// small record and touches one `Map`: no semaphore, no fiber.
import * as Effect from "effect/Effect"

interface Waiter {
  /** Set when the turn was handed to this waiter; it then owns the turn and must pass it on. */
  handed: boolean
  /** Cancelled (timed out or interrupted) before being handed the turn. */
  gone: boolean
  resume: ((effect: Effect.Effect<void>) => void) | undefined
}

interface Turn {
  readonly waiters: Array<Waiter>
}

export interface LocalQueue {
  /**
   * Runs `f` with the key's turn, waiting at most `budgetMillis` for it (`wait`) or not at all (`try`).
   * `f` is told whether it had to wait behind another fiber, and given `passTurn`, which hands the
   * turn on before `f` ends (at most once; the turn is passed on when `f` ends otherwise). `onMissed`
   * runs instead when the turn was not had in time (or, for `try`, was taken).
   */
  readonly withTurn: <A, E, R>(
    key: string,
    mode: "wait" | "try",
    budgetMillis: number,
    f: (waited: boolean, passTurn: () => void) => Effect.Effect<A, E, R>,
    onMissed: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
  /** Whether any fiber holds or waits for the key's turn (tests). */
  readonly isBusy: (key: string) => boolean
  /** Whether some fiber waits for the key's turn (it will be the client's next contender). */
  readonly hasWaiters: (key: string) => boolean
}

export const make = (): LocalQueue => {
  const turns = new Map<string, Turn>()

  /** Hands the turn to the oldest live waiter, or frees it. */
  const pass = (key: string, turn: Turn): void => {
    let next = turn.waiters.shift()
    while (next !== undefined && next.gone) next = turn.waiters.shift()
    if (next === undefined) {
      turns.delete(key)
      return
    }
    next.handed = true
    const resume = next.resume
    next.resume = undefined
    resume?.(Effect.void)
  }

  /** `pass`, once: the holder may hand the turn on early, and it is passed on at the end regardless. */
  const passOnce = (key: string, turn: Turn): (() => void) => {
    let passed = false
    return () => {
      if (passed) return
      passed = true
      pass(key, turn)
    }
  }

  /** Waits to be handed the turn: `true` when it was (the caller then owns it), `false` on timeout. */
  const wait = (key: string, turn: Turn, budgetMillis: number): Effect.Effect<boolean> => {
    const waiter: Waiter = { handed: false, gone: false, resume: undefined }
    turn.waiters.push(waiter)
    return Effect.callback<void>((resume) => {
      if (waiter.handed) return resume(Effect.void)
      waiter.resume = resume
    }).pipe(
      Effect.timeoutOption(Math.max(0, budgetMillis)),
      // Handed the turn just as the budget ran out: it is ours all the same (and passed on after).
      Effect.map(() => waiter.handed),
      Effect.onExit((exit) =>
        Effect.sync(() => {
          waiter.resume = undefined
          if (!waiter.handed) waiter.gone = true
          else if (exit._tag === "Failure") pass(key, turn)
        })
      )
    )
  }

  return {
    withTurn: (key, mode, budgetMillis, f, onMissed) =>
      Effect.suspend(() => {
        const turn = turns.get(key)
        if (turn === undefined) {
          const mine: Turn = { waiters: [] }
          turns.set(key, mine)
          const passTurn = passOnce(key, mine)
          return Effect.ensuring(f(false, passTurn), Effect.sync(passTurn))
        }
        if (mode === "try") return onMissed
        return Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(restore(wait(key, turn, budgetMillis)), (had) => {
            if (!had) return restore(onMissed)
            const passTurn = passOnce(key, turn)
            return Effect.ensuring(restore(f(true, passTurn)), Effect.sync(passTurn))
          })
        )
      }),
    isBusy: (key) => turns.has(key),
    hasWaiters: (key) => turns.get(key)?.waiters.some((waiter) => !waiter.gone) ?? false
  }
}
