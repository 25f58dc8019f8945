// `Election.observe`: a stream of who leads, pushed by the election's word to its observers (a
// proclamation or an announcement) and read again at least every `intervalMillis`, so a lost word
// only delays an observer by that much.
//
// The stream's first element is the state at subscription. After it, an element is emitted only
// when the state moved forward: a higher term, a later proclamation of the term shown (a higher
// revision), or nobody leading after a leader. A term that was shown ending never comes back, and a
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
interface Shown {
  /** Nothing yet: the next read is shown, whatever it says. */
  readonly first: boolean
  /** The highest term shown. */
  readonly term: number
  /** The revision of `term` shown. */
  readonly revision: number
  /** Whether the last element was "nobody leads" (the term shown before it has ended). */
  readonly vacant: boolean
}

const start: Shown = { first: true, term: 0, revision: 0, vacant: false }

/** What to emit for `view` after `shown`, if anything, and what is shown then. */
export const advance = (
  shown: Shown,
  view: ElectionView
): readonly [Option.Option<LeaderRecord>, Shown] | undefined => {
  switch (view._tag) {
    case "Leading": {
      const { record } = view
      const newer =
        shown.first ||
        record.term > shown.term ||
        (record.term === shown.term && !shown.vacant && record.revision > shown.revision)
      return newer
        ? [Option.some(record), { first: false, term: record.term, revision: record.revision, vacant: false }]
        : undefined
    }
    case "Vacant":
      return shown.first || !shown.vacant ? [Option.none(), { ...shown, first: false, vacant: true }] : undefined
    case "Unproclaimed":
      // A new term has not proclaimed yet: the leader shown has gone. Its record comes with the
      // proclamation's word.
      return shown.first || (!shown.vacant && view.term > shown.term)
        ? [Option.none(), { ...shown, first: false, vacant: true }]
        : undefined
  }
}

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
  const wait: Effect.Effect<unknown, LockRedisError> =
    backend.wakeups === undefined
      ? Effect.sleep(intervalMillis)
      : backend.wakeups.await(key, observerId, intervalMillis)
  const read = readView(elections, key, timeoutMillis, intervalMillis)
  const lag = Metric.withAttributes(ElectionMetrics.observerLag, { namespace })
  const next = (shown: Shown): Effect.Effect<readonly [Option.Option<LeaderRecord>, Shown], LockRedisError> =>
    Effect.flatMap(shown.first ? read : Effect.andThen(wait, read), (view) => {
      const step = advance(shown, view)
      if (step === undefined) return next(shown)
      const [element] = step
      // A term seen for the first time: how long after its start.
      if (Option.isNone(element) || element.value.revision !== 1 || shown.first) return Effect.succeed(step)
      const since = element.value.since
      return Effect.as(
        Effect.flatMap(Clock.currentTimeMillis, (now) => Metric.update(lag, Math.max(0, now - since) / 1000)),
        step
      )
    })
  return Stream.unfold(start, next)
}
