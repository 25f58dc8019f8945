// What the peers bench runs: the workloads, their sizes in the full and the --quick run, and the order
// of the libraries in each round. Every workload is bounded by its window (or its hold and acquire
// budget), so the whole run is bounded too.
import type { Job } from "./protocol.ts"

export interface Plan {
  readonly name: "full" | "quick"
  /** Rounds of the cheap workloads (uncontended, contended); each held workload has its own. */
  readonly rounds: number
  /** The lease of the uncontended and contended workloads: long, so no renewal happens there. */
  readonly leaseMillis: number
  readonly uncontended: { readonly warmupMillis: number; readonly durationMillis: number }
  readonly contended: { readonly durationMillis: number; readonly warmupCycles: number }
  readonly held: {
    /**
     * How many locks each held workload holds, and in how many rounds. A round of 1,000 locks measures
     * about 100 ms of CPU, so it runs several; 10,000 once (losing none is its point, and it is long).
     */
    readonly counts: ReadonlyArray<{ readonly count: number; readonly rounds: number }>
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
  // 9 s is three leases: every lock must be renewed at least twice to survive.
  held: {
    counts: [
      { count: 1000, rounds: 3 },
      { count: 10_000, rounds: 1 }
    ],
    leaseMillis: 3000,
    holdMillis: 9000,
    acquireBudgetMillis: 60_000
  }
}

/** Every workload and library once, with tiny sizes: a smoke test of the code paths, not a measurement. */
export const quick: Plan = {
  name: "quick",
  rounds: 1,
  leaseMillis: 10_000,
  uncontended: { warmupMillis: 100, durationMillis: 300 },
  contended: { durationMillis: 300, warmupCycles: 10 },
  held: {
    counts: [
      { count: 100, rounds: 1 },
      { count: 1000, rounds: 1 }
    ],
    leaseMillis: 3000,
    holdMillis: 400,
    acquireBudgetMillis: 20_000
  }
}

/** The contended shape the issue fixes: 8 workers on one key, each holding it 1 ms. */
export const contendedWorkers = 8
export const holdMillis = 1

/** One workload as the orchestrator runs it: the jobs of its processes and how long to wait for them. */
export interface Workload {
  readonly id: string
  readonly kind: "uncontended" | "contended" | "held"
  readonly title: string
  /** Rounds of this workload: the plan's `rounds`, or a held workload's own. */
  readonly rounds: number
  readonly durationMillis: number
  readonly resultTimeoutMillis: number
  /** Global worker ids (contended), for fairness. */
  readonly workers: ReadonlyArray<number>
  /**
   * Whether the library's processes and the server run on one CPU (the first) for this workload, to
   * take the processors' cross wake-ups out of a cycle (see affinity.ts); every other workload runs on all.
   */
  readonly oneCpu: boolean
  /** One job per process; `namespace` is unique to the run. */
  readonly jobs: (namespace: string) => ReadonlyArray<Job>
}

const range = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

const uncontended = (plan: Plan, concurrency: number, oneCpu = false): Workload => ({
  id: `uncontended-${concurrency}${oneCpu ? "-onecpu" : ""}`,
  kind: "uncontended",
  title:
    `Uncontended, concurrency ${concurrency}: ${concurrency} loop(s) in one process, each on its own key` +
    (oneCpu ? "; the process and the server on one CPU" : ""),
  rounds: plan.rounds,
  durationMillis: plan.uncontended.durationMillis,
  resultTimeoutMillis: 30_000,
  workers: [],
  oneCpu,
  jobs: (namespace) => [
    {
      namespace,
      leaseMillis: plan.leaseMillis,
      workload: { _tag: "uncontended", concurrency, warmupMillis: plan.uncontended.warmupMillis }
    }
  ]
})

const contended = (plan: Plan, processes: number, thinkMillis: number): Workload => {
  const workers = range(contendedWorkers)
  const perProcess = contendedWorkers / processes
  return {
    id: `contended-${processes}p-think${thinkMillis}`,
    kind: "contended",
    title:
      `One key, ${contendedWorkers} workers in ${processes} process${processes === 1 ? "" : "es"}, ` +
      `${holdMillis} ms hold, ${thinkMillis} ms think`,
    rounds: plan.rounds,
    durationMillis: plan.contended.durationMillis,
    resultTimeoutMillis: 30_000,
    workers,
    oneCpu: false,
    jobs: (namespace) =>
      range(processes).map((p) => ({
        namespace,
        leaseMillis: plan.leaseMillis,
        workload: {
          _tag: "contended",
          key: `${namespace}:hot`,
          workers: workers.slice(p * perProcess, (p + 1) * perProcess),
          holdMillis,
          thinkMillis,
          warmupCycles: plan.contended.warmupCycles
        }
      }))
  }
}

const held = (plan: Plan, count: number, rounds: number): Workload => ({
  id: `held-${count}`,
  kind: "held",
  title: `${count} held locks, lease ${plan.held.leaseMillis} ms, held ${plan.held.holdMillis} ms once all are held`,
  rounds,
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
        count,
        holdMillis: plan.held.holdMillis,
        acquireBudgetMillis: plan.held.acquireBudgetMillis
      }
    }
  ]
})

/** The workloads that run `rounds` times, in this order within a round. */
export const cheap = (plan: Plan): ReadonlyArray<Workload> => [
  uncontended(plan, 1),
  uncontended(plan, 1, true),
  uncontended(plan, 64),
  contended(plan, 1, 10),
  contended(plan, 1, 0),
  contended(plan, 4, 10),
  contended(plan, 4, 0)
]

/** The long held-lock workloads, each its own number of rounds. */
export const expensive = (plan: Plan): ReadonlyArray<Workload> =>
  plan.held.counts.map(({ count, rounds }) => held(plan, count, rounds))

/** The libraries in round `round` of workload number `index`: rotated, so no library is always first. */
export const order = <A>(items: ReadonlyArray<A>, round: number, index: number): ReadonlyArray<A> => {
  const shift = (round + index) % items.length
  return [...items.slice(shift), ...items.slice(0, shift)]
}
