// What a replicated backend keeps across its operations: how many replicas each master listed last,
// the keys that were busy recently, and the group commit of acknowledged acquisitions, if any.
import type { GroupCommit } from "./groupCommit/groupCommit.ts"

/** How many replicas each master listed in its last `ROLE` reply (for the next early `WAIT`). */
export type ReplicaCounts = Map<string, number>

/**
 * Keys that were busy recently. An early `WAIT` pays off only when the script writes a lease; on a
 * busy key it would hold a pooled connection until the replicas have the waiter's registration,
 * which under contention starves the renewals that share the pool. So a key that answered busy
 * within the last few seconds is acquired the two-step way: script and `ROLE`, then `WAIT` only if
 * it wrote. (A heuristic, timed with `performance.now()`: it changes cost, never the outcome.)
 */
export interface BusyKeys {
  readonly note: (key: string) => void
  readonly recent: (key: string) => boolean
}

const busyMemoryMillis = 5_000
const busyMemorySize = 10_000

export const busyKeys = (): BusyKeys => {
  const until = new Map<string, number>()
  return {
    note: (key) => {
      if (until.size >= busyMemorySize) until.clear()
      until.set(key, performance.now() + busyMemoryMillis)
    },
    recent: (key) => {
      const end = until.get(key)
      if (end === undefined) return false
      if (end > performance.now()) return true
      until.delete(key)
      return false
    }
  }
}

/** What a backend keeps across operations. */
export interface Known {
  readonly replicaCounts: ReplicaCounts
  readonly busy: BusyKeys
  /** Batches acknowledged acquisitions per node (absent: each goes on its own). */
  readonly groups?: GroupCommit | undefined
}
