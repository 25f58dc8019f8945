// The election demo's observer: a fiber that follows `observe` of the election, prints each state it
// is shown as a line of the term log, and records it with the time it arrived (`monotonicMicros`), so
// the script can wait for a change and measure how long it took to be seen.
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Election } from "@sage/lock"
import { monotonicMicros } from "../protocol.ts"

/** One state the observer was shown, and when it arrived. */
export interface Sighting {
  readonly at: number
  readonly state: Option.Option<Election.Leader>
}

export interface Observer {
  /** Everything shown so far, in order. */
  readonly seen: ReadonlyArray<Sighting>
  /** Why the stream stopped, when it failed. */
  readonly failure: () => string | undefined
}

/** `+1.234s` since `startedAt` (both `monotonicMicros`). */
export const elapsed = (startedAt: number, at: number): string => `+${((at - startedAt) / 1e6).toFixed(3)}s`

/** One term log line. The leader proclaims its pid, so the line says which process leads. */
export const describe = (startedAt: number, sighting: Sighting): string =>
  `${elapsed(startedAt, sighting.at)}  ${Option.match(sighting.state, {
    onNone: () => "nobody leads",
    onSome: (leader) => `term ${leader.term} led by ${leader.candidate} (pid ${leader.value})`
  })}`

/** Starts observing `name`; each state is printed with `print` as it arrives. Stops with the scope. */
export const start = (
  elections: Election.ElectionClient,
  name: string,
  startedAt: number,
  print: (line: string) => void
): Effect.Effect<Observer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const seen: Array<Sighting> = []
    let failure: string | undefined
    yield* Effect.forkScoped(
      Stream.runForEach(elections.observe(name), (state) =>
        Effect.sync(() => {
          const sighting = { at: monotonicMicros(), state }
          seen.push(sighting)
          print(describe(startedAt, sighting))
        })
      ).pipe(
        Effect.catch((error) =>
          Effect.sync(() => {
            failure = `the observer stopped: ${error.message}`
            print(failure)
          })
        )
      )
    )
    return { seen, failure: () => failure }
  })

/** A leader the observer was shown, with when. */
export interface Seen {
  readonly at: number
  readonly leader: Election.Leader
}

/** The first leader shown at index `from` or later that `accept` takes. */
export const findLeader = (
  observer: Observer,
  from: number,
  accept: (leader: Election.Leader) => boolean
): Seen | undefined => {
  for (let i = from; i < observer.seen.length; i++) {
    const { at, state } = observer.seen[i]!
    if (Option.isSome(state) && accept(state.value)) return { at, leader: state.value }
  }
  return undefined
}

/** The state shown last, when it is a leader. */
export const currentLeader = (observer: Observer): Seen | undefined => {
  const last = observer.seen[observer.seen.length - 1]
  return last !== undefined && Option.isSome(last.state) ? { at: last.at, leader: last.state.value } : undefined
}
