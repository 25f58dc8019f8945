// Garbage collection in a worker during a measured window, from Node's `gc` performance entries: how
// long the collector ran and how many full (mark-compact) collections there were. A client that
// V8 starts allocating in its old generation runs many more full collections and spends several
// times the CPU a cycle; these figures tell such a round
// from a slow hour.
import { constants, type PerformanceEntry, PerformanceObserver } from "node:perf_hooks"

export interface GcFigures {
  /** Time the collector ran during the window, ms (all kinds of collection). */
  readonly gcMillis: number
  /** Full (mark-compact) collections during the window. */
  readonly fullGcs: number
}

/** Starts counting; the returned function stops and answers what was counted since. */
export const watchGc = (): (() => GcFigures) => {
  let gcMillis = 0
  let fullGcs = 0
  const count = (entries: ReadonlyArray<PerformanceEntry>): void => {
    for (const entry of entries) {
      gcMillis += entry.duration
      // A `gc` entry's `detail.kind` says which collection it was (not in this @types/node's type).
      const { detail } = entry as { readonly detail?: { readonly kind?: number } }
      if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) fullGcs++
    }
  }
  const observer = new PerformanceObserver((list) => count(list.getEntries()))
  observer.observe({ entryTypes: ["gc"] })
  return () => {
    // Entries reach the callback asynchronously: take the ones still queued before stopping.
    count(observer.takeRecords())
    observer.disconnect()
    return { gcMillis, fullGcs }
  }
}
