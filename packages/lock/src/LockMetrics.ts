/**
 * The metrics every lock client records, through Effect's `Metric` registry. Export them with the
 * `effect/observability` modules (OTLP, Prometheus) like any other Effect metric; see
 * `docs/observability.md`.
 *
 * Names follow OpenTelemetry's conventions: dotted, durations in seconds, the unit in the metric's
 * `unit` attribute (which Effect's OTLP exporter reads). Prometheus shows them with underscores
 * (`sage_lock_acquisitions`).
 *
 * Attributes: `namespace` on all three; `outcome` on acquisitions (`acquired`, `busy` for a
 * `tryWithLock` that found the lock taken, by another process or by another fiber of the same
 * client, `timed_out` also when the whole wait was behind another fiber of the client, `lost`,
 * `error`); `phase` on losses (`acquire`, `renew`, `release`).
 *
 * @since 0.1.0
 */
import * as Metric from "effect/Metric"

/**
 * Lock calls by outcome: one per `withLock`/`tryWithLock` call that got past argument validation.
 *
 * @category metrics
 * @since 0.1.0
 */
export const acquisitions: Metric.Counter<number> = Metric.counter("sage.lock.acquisitions", {
  description: "lock calls by outcome",
  attributes: { unit: "{acquisition}" }
})

/**
 * How long callers waited for the locks they got, from the call to the body's start, in seconds.
 * Buckets from 0.5 ms doubling to about 65 s.
 *
 * @category metrics
 * @since 0.1.0
 */
export const waitTime: Metric.Histogram<number> = Metric.histogram("sage.lock.wait.duration", {
  description: "time from the call to the body's start, for acquired locks",
  attributes: { unit: "s" },
  boundaries: Metric.exponentialBoundaries({ start: 0.0005, factor: 2, count: 18 })
})

/**
 * Locks lost while relied on, by phase: every `LockLost` a caller saw.
 *
 * @category metrics
 * @since 0.1.0
 */
export const lost: Metric.Counter<number> = Metric.counter("sage.lock.lost", {
  description: "locks lost while held or before the body started",
  attributes: { unit: "{lock}" }
})
