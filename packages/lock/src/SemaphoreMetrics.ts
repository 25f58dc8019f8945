/**
 * The metric every semaphore client records beside the lock's own (`LockMetrics`, which count its
 * calls, waits and losses under the semaphore's namespace): how many permits its bodies hold now.
 * Export it like every other Effect metric; see `docs/observability.md`.
 *
 * @since 0.2.1
 */
import * as Metric from "effect/Metric"

/**
 * Permits held by the bodies of this process's semaphore calls, by `namespace`: raised when a body
 * starts holding its permits and lowered when it ends. Summed over processes, it is the permits in
 * use. Read-write locks count the same way: a reader holds one permit, a writer all of them.
 *
 * @category metrics
 * @since 0.2.1
 */
export const permitsHeld: Metric.Gauge<number> = Metric.gauge("sage.semaphore.permits.held", {
  description: "permits held by this process's semaphore bodies",
  attributes: { unit: "{permit}" }
})
