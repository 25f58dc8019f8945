// In-process turns: fibers of one lock client that want the same key queue here, first come first
// served, and only the fiber at the head goes to the server.
//
// Without it, fibers of one process poll the server against each other and the fiber that just
// released usually wins again (measured in docs/benchmarks.md). With it, in-process handover is
// immediate and fair, and the server sees one contender per process and key. Exclusion between
// processes is still the server's lock; this only orders the callers inside one client. A turn's
// wait is part of the caller's budget: `waitTimeout` covers it, and `tryWithLock` never waits for it.
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"

interface Turn {
  readonly semaphore: Semaphore.Semaphore
  users: number
}

export interface LocalQueue {
  /**
   * Runs `f` with the key's turn, waiting at most `budgetMillis` for it (`wait`) or not at all (`try`).
   * `onMissed` runs instead when the turn was not had in time.
   */
  readonly withTurn: <A, E, R>(
    key: string,
    mode: "wait" | "try",
    budgetMillis: number,
    f: Effect.Effect<A, E, R>,
    onMissed: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E, R>
}

export const make = (): LocalQueue => {
  const turns = new Map<string, Turn>()
  // Turns are created on demand and dropped when nobody holds or waits for them, so the map only
  // ever holds keys in use.
  const enter = (key: string): Turn => {
    let turn = turns.get(key)
    if (turn === undefined) {
      turn = { semaphore: Semaphore.makeUnsafe(1), users: 0 }
      turns.set(key, turn)
    }
    turn.users++
    return turn
  }
  const leave = (key: string, turn: Turn): void => {
    if (--turn.users === 0) turns.delete(key)
  }
  return {
    withTurn: (key, mode, budgetMillis, f, onMissed) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const turn = enter(key)
          const had =
            mode === "try"
              ? yield* turn.semaphore.takeIfAvailable(1)
              : yield* restore(turn.semaphore.take(1)).pipe(
                  Effect.timeoutOption(Math.max(0, budgetMillis)),
                  Effect.map((taken) => taken._tag === "Some"),
                  Effect.onInterrupt(() => Effect.sync(() => leave(key, turn)))
                )
          const exit = yield* Effect.exit(restore(had ? f : onMissed))
          if (had) yield* turn.semaphore.release(1)
          leave(key, turn)
          return yield* exit
        })
      )
  }
}
