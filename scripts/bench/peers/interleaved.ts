// The uncontended rows of the peers bench measured in short interleaved slices. The main run gives
// each library one 2.5 s window a round, three rounds, so a library and the baseline it is compared
// with can be measured ten or twenty seconds apart: on this shared machine that is long enough for
// other work to come or go, and the c1 ratio of the same code has moved between 0.48x and 0.91x from
// run to run. Here the libraries take turns in slices of a few hundred milliseconds (rotated order,
// every library's process kept alive), many rounds of them, so each per-round ratio compares
// measurements at most a few seconds apart; the report gives the median of those ratios with its spread
// and a distribution-free 95 % confidence interval. It reuses the peers bench's worker processes and
// loops, so the figures mean what the main run's do.
// Run `node --conditions=@sage/source bench/peers/interleaved.ts [--quick]` in scripts/.
import * as Effect from "effect/Effect"
import { NodeRuntime } from "@effect/platform-node"
import * as Arguments from "../arguments.ts"
import { load1, median, medianInterval, nearestRank, perSecond, table } from "../stats.ts"
import { figures, type Figures } from "./analysis.ts"
import { withWorkers } from "./session.ts"
import { order } from "./plan.ts"
import type * as Processes from "./processes.ts"
import { type Job, type Library, libraries, libraryLabel } from "./protocol.ts"

const usage = `usage: node bench/peers/interleaved.ts [--quick]
  Starts one loopback redis-server and measures the peers bench's uncontended workloads (concurrency
  1, concurrency 1 on one CPU, concurrency 64) on every library in short slices that take turns, many
  rounds, and prints the per-round ratios to the node-redis baseline as Markdown. About 7 minutes;
  --quick runs two rounds of tiny slices (a smoke test, not a measurement).`

interface SlicePlan {
  readonly name: "full" | "quick"
  readonly rounds: number
  /** Each slice's own warm-up (the process was idle while the others ran), then its window. */
  readonly warmupMillis: number
  readonly windowMillis: number
  /** One untimed slice per library before the first round: connects, JIT, the pools filled. */
  readonly firstWarmupMillis: number
  readonly leaseMillis: number
}

const full: SlicePlan = {
  name: "full",
  rounds: 30,
  warmupMillis: 150,
  windowMillis: 400,
  firstWarmupMillis: 1500,
  leaseMillis: 10_000
}

const quick: SlicePlan = {
  name: "quick",
  rounds: 2,
  warmupMillis: 50,
  windowMillis: 100,
  firstWarmupMillis: 100,
  leaseMillis: 10_000
}

const runTimeout = (plan: SlicePlan) => (plan.name === "quick" ? "3 minutes" : "20 minutes")

interface SliceWorkload {
  readonly id: string
  readonly title: string
  readonly concurrency: number
  readonly oneCpu: boolean
}

const workloads: ReadonlyArray<SliceWorkload> = [
  { id: "c1", title: "Uncontended, concurrency 1", concurrency: 1, oneCpu: false },
  {
    id: "c1-onecpu",
    title: "Uncontended, concurrency 1, the process and the server on one CPU",
    concurrency: 1,
    oneCpu: true
  },
  { id: "c64", title: "Uncontended, concurrency 64", concurrency: 64, oneCpu: false }
]

/** Every library's slices of one workload: index = round. */
type Slices = Record<Library, Array<Figures>>

const times = (value: number): string => (Number.isFinite(value) ? `${value.toFixed(2)}x` : "-")

/** Per-round ratios of one figure, the library's over the baseline's of the same round. */
const ratios = (slices: Slices, library: Library, pick: (f: Figures) => number): Array<number> =>
  slices[library].flatMap((figures, round) => {
    const base = slices.baseline[round]
    return base === undefined ? [] : [pick(figures) / pick(base)]
  })

const rowOf = (slices: Slices, library: Library): Array<string> => {
  const rate = ratios(slices, library, (f) => f.perSecond)
    .filter(Number.isFinite)
    .toSorted((a, b) => a - b)
  const interval = medianInterval(rate.length)
  const cpu = ratios(slices, library, (f) => f.cpuMicrosPer)
  const server = ratios(slices, library, (f) => f.serverCpuMicrosPer)
  const failures = slices[library].reduce((sum, f) => sum + f.failures, 0)
  return [
    libraryLabel[library],
    String(rate.length),
    perSecond(median(slices[library].map((f) => f.perSecond))),
    times(median(rate)),
    interval === undefined ? "-" : `${times(rate[interval[0]]!)}-${times(rate[interval[1]]!)}`,
    `${times(nearestRank(rate, 0.25))}-${times(nearestRank(rate, 0.75))}`,
    `${times(rate[0] ?? Number.NaN)}-${times(rate[rate.length - 1] ?? Number.NaN)}`,
    `${rate.filter((r) => r >= 0.9).length}/${rate.length}`,
    median(slices[library].map((f) => f.cpuMicrosPer)).toFixed(1),
    times(median(cpu)),
    times(median(server)),
    String(failures)
  ]
}

const workloadTable = (slices: Slices): string =>
  table(
    [
      "library",
      "rounds",
      "cycles/s (median)",
      "vs baseline",
      "95 % CI of that median",
      "middle half of rounds",
      "all rounds",
      "rounds >= 0.9x",
      "CPU us/cycle",
      "CPU vs baseline",
      "server CPU vs baseline",
      "failures"
    ],
    libraries.map((library) => rowOf(slices, library))
  )

const jobOf = (plan: SlicePlan, workload: SliceWorkload, namespace: string, warmupMillis: number): Job => ({
  namespace,
  leaseMillis: plan.leaseMillis,
  workload: { _tag: "uncontended", concurrency: workload.concurrency, warmupMillis }
})

const runSlices = async (
  plan: SlicePlan,
  processes: Processes.Processes,
  runId: string,
  signal: AbortSignal,
  progress: (text: string) => void
): Promise<
  ReadonlyArray<{ readonly workload: SliceWorkload; readonly slices: Slices; readonly loads: Array<number> }>
> => {
  const out = []
  for (const [index, workload] of workloads.entries()) {
    const slices: Slices = {
      sage: [],
      "sage-ioredis": [],
      redlock: [],
      sesame: [],
      semaphore: [],
      protocol: [],
      baseline: []
    }
    const loads: Array<number> = []
    const measure = async (library: Library, round: number, warmupMillis: number) => {
      if (signal.aborted) throw new Error("interrupted")
      const namespace = `slices-${runId}-${workload.id}-${library}-${round}`
      return processes.measure(library, [jobOf(plan, workload, namespace, warmupMillis)], {
        durationMillis: plan.windowMillis,
        resultTimeoutMillis: 30_000,
        oneCpu: workload.oneCpu
      })
    }
    progress(`${workload.id}: first warm-up of every library`)
    for (const library of libraries) await measure(library, -1, plan.firstWarmupMillis)
    let skipped = false
    for (let round = 0; round < plan.rounds && !skipped; round++) {
      if (round % 10 === 0) progress(`${workload.id}: round ${round + 1} of ${plan.rounds}`)
      loads.push(load1())
      for (const library of order(libraries, round, index)) {
        const measured = await measure(library, round, plan.warmupMillis)
        if (measured === undefined) {
          progress("  skipped: could not run the processes on one CPU (taskset, or a single CPU)")
          skipped = true
          break
        }
        slices[library][round] = figures(measured, [])
      }
    }
    if (!skipped) out.push({ workload, slices, loads })
  }
  return out
}

const program = Effect.gen(function* () {
  const args = yield* Arguments.parse(usage)
  if (args === undefined) return
  const plan = args.quick ? quick : full
  const runId = crypto.randomUUID().slice(0, 8)
  const ran = yield* withWorkers({
    label: "interleaved",
    timeout: runTimeout(plan),
    run: (processes, signal, progress) => runSlices(plan, processes, runId, signal, progress)
  })
  const results = ran.result
  const lines = [
    `# Peers, uncontended, in interleaved slices${plan.name === "quick" ? " (--quick: smoke run, too few samples to quote)" : ""}`,
    "",
    `- ${new Date().toISOString()}, ${ran.seconds} s in total; ${plan.rounds} rounds per workload, each library ` +
      `one slice a round (rotated order): ${plan.warmupMillis} ms of warm-up, then a ${plan.windowMillis} ms window; ` +
      `one untimed slice of ${plan.firstWarmupMillis} ms per library before the first round`,
    ...ran.environment,
    `- lease ${plan.leaseMillis} ms; each library runs in a worker process of its own, the same loops as the main peers run`,
    "- vs baseline: the median over rounds of (library / node-redis baseline in the same round); its 95 % " +
      "confidence interval is distribution-free (order statistics of the rounds' ratios); CPU is the " +
      "worker's user + system time per cycle, server CPU the server process's (INFO cpu)",
    "",
    ...results.flatMap(({ workload, slices, loads }) => [
      `## ${workload.title}`,
      "",
      `Median load1 at the rounds' starts: ${median(loads).toFixed(2)} (range ${Math.min(...loads).toFixed(2)}-${Math.max(...loads).toFixed(2)})`,
      "",
      workloadTable(slices),
      ""
    ])
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n")))
})

program.pipe(NodeRuntime.runMain)
