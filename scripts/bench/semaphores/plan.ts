// What the semaphores bench runs: its libraries, its workloads (the peers bench's three, with a
// `limit`), and their sizes in the full and the --quick run. Every workload is bounded by its window
// (or its hold and acquire budget), so the whole run is bounded too.
import type { Workload } from "../peers/plan.ts"
import type { Job } from "../peers/protocol.ts"
import { range } from "../peers/drivers.ts"

/**
 * `baseline` is the hand-written node-redis semaphore (drivers.ts), the yardstick of every ratio.
 * `protocol` is the `Semaphore`'s scripts sent raw by the baseline's loop: the floor of its protocol.
 * `ceiling` is no semaphore at all, in the contended workloads only: the workers hold and think and
 * nothing else, which bounds what any semaphore can reach there.
 */
export const libraries = ["sage", "semaphore", "multi", "protocol", "baseline", "ceiling"] as const
export type Library = (typeof libraries)[number]

export const libraryLabel: Record<Library, string> = {
  sage: "@sage/lock Semaphore",
  semaphore: "redis-semaphore Semaphore",
  multi: "redis-semaphore MultiSemaphore",
  protocol: "@sage/lock's semaphore protocol, raw",
  baseline: "node-redis baseline",
  ceiling: "no semaphore (hold and think only)"
}

/** Whether `library` runs `workload`: every library runs every workload, but the ceiling only the contended ones. */
export const runs = (library: Library, workload: Workload): boolean =>
  library !== "ceiling" || workload.kind === "contended"

export interface Plan {
  readonly name: "full" | "quick"
  readonly rounds: number
  /** The lease of the uncontended and contended workloads: long, so no renewal happens there. */
  readonly leaseMillis: number
  readonly uncontended: { readonly warmupMillis: number; readonly durationMillis: number }
  readonly contended: { readonly durationMillis: number; readonly warmupCycles: number }
  /** `count` permits held at once, `limit` on each key (so `count / limit` keys), in `rounds` rounds. */
  readonly held: {
    readonly count: number
    readonly limit: number
    readonly rounds: number
    readonly leaseMillis: number
    readonly holdMillis: number
    readonly acquireBudgetMillis: number
  }
}

export const full: Plan = {
  name: "full",
  rounds: 3,
  leaseMillis: 10_000,
  uncontended: { warmupMillis: 1500, durationMillis: 2500 },
  contended: { durationMillis: 3000, warmupCycles: 200 },
  // 9 s is three leases: every permit must be renewed at least twice to survive.
  held: { count: 10_000, limit: 100, rounds: 1, leaseMillis: 3000, holdMillis: 9000, acquireBudgetMillis: 60_000 }
}

/** Every workload and library once, with tiny sizes: a smoke test of the code paths, not a measurement. */
export const quick: Plan = {
  name: "quick",
  rounds: 1,
  leaseMillis: 10_000,
  uncontended: { warmupMillis: 100, durationMillis: 300 },
  contended: { durationMillis: 300, warmupCycles: 10 },
  held: { count: 200, limit: 100, rounds: 1, leaseMillis: 3000, holdMillis: 400, acquireBudgetMillis: 20_000 }
}

/** The uncontended and contended semaphores' size. */
export const limit = 4
/** The contended shape the issue fixes: 16 workers on one key of 4 permits, each holding one 1 ms. */
export const contendedWorkers = 16
export const holdMillis = 1
export const thinkMillis = 10

const uncontended = (plan: Plan, concurrency: number): Workload => ({
  id: `uncontended-${concurrency}`,
  kind: "uncontended",
  title: `Uncontended, concurrency ${concurrency}: ${concurrency} loop(s) in one process, each on its own key of ${limit} permits`,
  rounds: plan.rounds,
  durationMillis: plan.uncontended.durationMillis,
  resultTimeoutMillis: 30_000,
  workers: [],
  oneCpu: false,
  jobs: (namespace) => [
    {
      namespace,
      leaseMillis: plan.leaseMillis,
      workload: { _tag: "uncontended", concurrency, warmupMillis: plan.uncontended.warmupMillis, limit }
    }
  ]
})

const contended = (plan: Plan, processes: number): Workload => {
  const workers = range(contendedWorkers)
  const perProcess = contendedWorkers / processes
  return {
    id: `contended-${processes}p`,
    kind: "contended",
    title:
      `One key of ${limit} permits, ${contendedWorkers} workers in ${processes} process${processes === 1 ? "" : "es"}, ` +
      `${holdMillis} ms hold, ${thinkMillis} ms think`,
    rounds: plan.rounds,
    durationMillis: plan.contended.durationMillis,
    resultTimeoutMillis: 30_000,
    workers,
    oneCpu: false,
    jobs: (namespace) =>
      range(processes).map((p): Job => ({
        namespace,
        leaseMillis: plan.leaseMillis,
        workload: {
          _tag: "contended",
          key: `${namespace}:hot`,
          workers: workers.slice(p * perProcess, (p + 1) * perProcess),
          holdMillis,
          thinkMillis,
          warmupCycles: plan.contended.warmupCycles,
          limit
        }
      }))
  }
}

const held = (plan: Plan): Workload => ({
  id: `held-${plan.held.count}`,
  kind: "held",
  title:
    `${plan.held.count} held permits (${plan.held.count / plan.held.limit} keys of ${plan.held.limit}), lease ` +
    `${plan.held.leaseMillis} ms, held ${plan.held.holdMillis} ms once all are held`,
  rounds: plan.held.rounds,
  durationMillis: 0,
  resultTimeoutMillis: plan.held.acquireBudgetMillis + plan.held.holdMillis + 60_000,
  workers: [],
  oneCpu: false,
  jobs: (namespace) => [
    {
      namespace,
      leaseMillis: plan.held.leaseMillis,
      workload: {
        _tag: "held",
        count: plan.held.count,
        holdMillis: plan.held.holdMillis,
        acquireBudgetMillis: plan.held.acquireBudgetMillis,
        limit: plan.held.limit
      }
    }
  ]
})

/** The workloads that run every round, in this order, and the held one after them. */
export const cheap = (plan: Plan): ReadonlyArray<Workload> => [
  uncontended(plan, 1),
  uncontended(plan, 64),
  contended(plan, 1),
  contended(plan, 4)
]
export const expensive = (plan: Plan): ReadonlyArray<Workload> => [held(plan)]

/** A workload's semaphore size, as its jobs carry it. */
export const limitOf = (workload: Workload): number => workload.jobs("")[0]?.workload.limit ?? 1
