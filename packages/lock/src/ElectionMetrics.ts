/**
 * The metrics every election client records, through Effect's `Metric` registry, beside the lock's
 * own (`LockMetrics`: a campaign is a lock acquisition in the election's namespace). Export them as
 * any other Effect metric; see `docs/observability.md`.
 *
 * Attributes: `namespace` on all three; `outcome` on leadership durations (`resigned` for a lead
 * that ended by `resign` or its scope's close, `lost` for one that was lost).
 *
 * @since 0.2.1
 */
import * as Metric from "effect/Metric"

/**
 * Terms won: one per `campaign` that led (its first proclamation written).
 *
 * @category metrics
 * @since 0.2.1
 */
export const terms: Metric.Counter<number> = Metric.counter("sage.election.terms", {
  description: "leaderships won",
  attributes: { unit: "{term}" }
})

/**
 * How long each lead lasted, from the campaign's win to its end, in seconds. Buckets from 10 ms
 * doubling to about 23 days.
 *
 * @category metrics
 * @since 0.2.1
 */
export const leadershipDuration: Metric.Histogram<number> = Metric.histogram("sage.election.leadership.duration", {
  description: "time from winning a term to its end",
  attributes: { unit: "s" },
  boundaries: Metric.exponentialBoundaries({ start: 0.01, factor: 2, count: 28 })
})

/**
 * How late observers see a new term: from the term's first proclamation (the server's clock) to the
 * observer's stream emitting it (the observer's clock), in seconds. Includes the difference between
 * the two clocks; values below zero are recorded as zero.
 *
 * @category metrics
 * @since 0.2.1
 */
export const observerLag: Metric.Histogram<number> = Metric.histogram("sage.election.observer.lag", {
  description: "time from a term's first proclamation to an observer seeing it",
  attributes: { unit: "s" },
  boundaries: Metric.exponentialBoundaries({ start: 0.0005, factor: 2, count: 18 })
})
