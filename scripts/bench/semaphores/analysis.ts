// The semaphores bench's figures: the peers bench's (peers/analysis.ts: rates, CPU, server calls,
// fairness, requests), with the two that mean something else when `limit` bodies may be inside at once.
// Both come from one sweep over the bodies' enter and exit times, which every worker reads on the host's
// one monotonic clock (peers/clock.ts), so the records of several processes make one timeline.
// - Over the limit: the moments more than `limit` bodies were inside at once. Must be 0.
// - Hand-off: from a release that left a full semaphore while a worker was waiting (asked before the
//   release, entered after it) to the start of the body of the first such waiter, each waiter claimed once.
import { summarize } from "../stats.ts"
import { type Figures, figures } from "../peers/analysis.ts"
import type { Workload } from "../peers/plan.ts"
import type { Measured } from "../peers/processes.ts"
import type { AcquisitionRecord } from "../peers/protocol.ts"
import { limitOf } from "./plan.ts"

/** Hand-offs and moments over the limit in `records` ([worker, requested, acquired, released]). */
export const permits = (records: ReadonlyArray<AcquisitionRecord>, limit: number) => {
  // Exits before enters at the same instant: a body that ends as another starts is not an overlap.
  const events = records
    .flatMap(([, , acquired, released]): Array<readonly [number, number]> => [
      [acquired, 1],
      [released, -1]
    ])
    .toSorted((a, b) => a[0] - b[0] || a[1] - b[1])
  const byStart = records.toSorted((a, b) => a[2] - b[2])
  const claimed = new Set<AcquisitionRecord>()
  const handoffs: Array<number> = []
  let inside = 0
  let overLimit = 0
  let first = 0
  for (const [at, step] of events) {
    if (step === 1) {
      if (++inside === limit + 1) overLimit++
      continue
    }
    if (inside-- < limit) continue
    while (first < byStart.length && byStart[first]![2] <= at) first++
    for (let i = first; i < byStart.length; i++) {
      const next = byStart[i]!
      if (next[1] <= at && !claimed.has(next)) {
        claimed.add(next)
        handoffs.push(next[2] - at)
        break
      }
    }
  }
  const summary = summarize(handoffs)
  return { handoffs: handoffs.length, handoffP50: summary.p50, handoffP99: summary.p99, overlaps: overLimit }
}

/** The peers' figures of one run; for the contended workloads, hand-off and `overlaps` (over the limit) by permits. */
export const semaphoreFigures = (run: Measured, workload: Workload): Figures => {
  const base = figures(run, workload.workers)
  if (workload.kind !== "contended") return base
  const records = run.results.flatMap((result) => (result._tag === "contended" ? result.records : []))
  return { ...base, ...permits(records, limitOf(workload)) }
}
