// `Election.observe`: a stream of who leads, pushed by the election's word to its observers (a
// proclamation or an announcement) and read again at least every `intervalMillis`, so a lost word
// only delays an observer by that much.
//
// The stream's first element is the state at subscription. After it, an element is emitted only
// when the state moved forward: a higher term, a later proclamation of the term shown (a higher
// revision), or nobody leading after a leader, once a second read a moment later agrees (a hand-over
// passes through a moment with nobody proclaimed, which is not shown). A term that was shown ending never comes back, and a
// lower term is never shown after a higher one (a read from a master that lost writes in a failover
// can answer an older state: it is skipped).
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as ElectionMetrics from "../../ElectionMetrics.ts"
import { observerId } from "../../ElectionScripts.ts"
import type { Backend, Elections, ElectionView, LeaderRecord } from "../../LockBackend.ts"
import type { LockRedisError } from "../../LockError.ts"

/** What an observer has shown so far. */
export interface Shown {
  /** Nothing yet: the next read is shown, whatever it says. */
  readonly first: boolean
  /** The highest term shown. */
  readonly term: number
  /** The revision of `term` shown. */
  readonly revision: number
  /** Whether the last element was "nobody leads" (the term shown before it has ended). */
  readonly vacant: boolean
  /**
   * Whether the last read found the leader shown gone with no successor proclaimed: a hand-over is
   * usually in between (the next leader proclaims within a round trip or two), so "nobody leads" is
   * shown only if the next read, soon after, still finds nobody.
   */
  readonly pending: boolean
}

export const start: Shown = { first: true, term: 0, revision: 0, vacant: false, pending: false }

/** What one read changes: the element to emit, if any, and what is shown then. */
export interface Step {
  readonly element: Option.Option<LeaderRecord> | undefined
  readonly shown: Shown
}

/** The leader shown is gone and nobody has proclaimed since: shown after a second read agrees. */
const gone = (shown: Shown): Step | undefined => {
  if (shown.first || shown.pending) {
    return { element: Option.none(), shown: { ...shown, first: false, vacant: true, pending: false } }
  }
  return shown.vacant ? undefined : { element: undefined, shown: { ...shown, pending: true } }
}

/** What `view` changes after `shown`; `undefined` when nothing does. */
export const advance = (shown: Shown, view: ElectionView): Step | undefined => {
  switch (view._tag) {
    case "Leading": {
      const { record } = view
      const newer =
        shown.first ||
        record.term > shown.term ||
        (record.term === shown.term && !shown.vacant && record.revision > shown.revision)
      if (newer) {
        return {
          element: Option.some(record),
          shown: { first: false, term: record.term, revision: record.revision, vacant: false, pending: false }
        }
      }
      return shown.pending ? { element: undefined, shown: { ...shown, pending: false } } : undefined
    }
    case "Vacant":
      return gone(shown)
    case "Unproclaimed":
      // A new term holds the lock but has not proclaimed: the leader shown has gone. Its record
      // comes with the proclamation's word.
      return shown.first || view.term > shown.term
        ? gone(shown)
        : shown.pending
          ? { element: undefined, shown: { ...shown, pending: false } }
          : undefined
  }
}

/** How soon an observer reads again to confirm that nobody leads (within its interval). */
const confirmMillis = 250

/** Reads until a read succeeds or fails for good: a temporary failure is tried again at the interval. */
const readView = (
  elections: Elections,
  key: string,
  timeoutMillis: number,
  intervalMillis: number
): Effect.Effect<ElectionView, LockRedisError> =>
  Effect.catchIf(
    elections.read(key, timeoutMillis),
    (error) => error.retryable,
    () =>
      Effect.andThen(
        Effect.sleep(intervalMillis),
        Effect.suspend(() => readView(elections, key, timeoutMillis, intervalMillis))
      )
  )

/** The observer stream of the election whose lock key is `key`. */
export const observe = (
  backend: Backend,
  elections: Elections,
  key: string,
  intervalMillis: number,
  timeoutMillis: number,
  namespace: string
): Stream.Stream<Option.Option<LeaderRecord>, LockRedisError> => {
  const waitFor = (millis: number): Effect.Effect<unknown, LockRedisError> =>
    backend.wakeups === undefined ? Effect.sleep(millis) : backend.wakeups.await(key, observerId, millis)
  const wait = waitFor(intervalMillis)
  const confirm = waitFor(Math.min(intervalMillis, confirmMillis))
  const read = readView(elections, key, timeoutMillis, intervalMillis)
  const lag = Metric.withAttributes(ElectionMetrics.observerLag, { namespace })
  const next = (shown: Shown): Effect.Effect<readonly [Option.Option<LeaderRecord>, Shown], LockRedisError> =>
    Effect.flatMap(shown.first ? read : Effect.andThen(shown.pending ? confirm : wait, read), (view) => {
      const step = advance(shown, view)
      if (step === undefined) return next(shown)
      const { element } = step
      if (element === undefined) return next(step.shown)
      const emitted = [element, step.shown] as const
      // A term seen for the first time: how long after its start.
      if (Option.isNone(element) || element.value.revision !== 1 || shown.first) return Effect.succeed(emitted)
      const since = element.value.since
      return Effect.as(
        Effect.flatMap(Clock.currentTimeMillis, (now) => Metric.update(lag, Math.max(0, now - since) / 1000)),
        emitted
      )
    })
  return Stream.unfold(start, next)
}
