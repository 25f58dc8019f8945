/**
 * The metrics every lock client records, through Effect's `Metric` registry. Export them with the
 * `effect/observability` modules (Prometheus, OTLP) like any other Effect metric.
 *
 * Attributes: `namespace` on all three; `outcome` on acquisitions (`acquired`, `busy` for a
 * `tryWithLock` that found the lock taken, `timed_out`, `lost`, `error`); `phase` on losses
 * (`acquire`, `renew`, `release`).
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import * as Metric from "effect/Metric"

/**
 * Acquisition attempts by outcome (one per `withLock`/`tryWithLock` call that reached the server).
 *
 * @category metrics
 * @since 0.1.0
 */
export const acquisitions: Metric.Counter<number> = Metric.counter("sage_lock_acquisitions_total", {
  description: "lock acquisitions by outcome"
})

/**
 * How long callers waited for the locks they got, from the call to the body's start.
 *
 * @category metrics
 * @since 0.1.0
 */
export const waitTime: Metric.Histogram<Duration.Duration> = Metric.timer("sage_lock_wait_duration", {
  description: "time from the call to the body's start, for acquired locks"
})

/**
 * Locks lost while relied on, by phase: every `LockLost` a caller saw.
 *
 * @category metrics
 * @since 0.1.0
 */
export const lost: Metric.Counter<number> = Metric.counter("sage_lock_lost_total", {
  description: "locks lost while held or before the body started"
})
