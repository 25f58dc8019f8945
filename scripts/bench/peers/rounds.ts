// The order of the whole run: every cheap workload in every round, the libraries rotated from round to
// round and workload to workload, then the held-lock workloads. One library runs at a time, so the
// server's counters over a window belong to that library alone. `runSchedule` runs any such schedule
// (the semaphores bench's too); `runAll` is the peers bench's.
import * as Crypto from "node:crypto"
import { load1 } from "../stats.ts"
import { type Figures, figures } from "./analysis.ts"
import { cheap, expensive, order, type Plan, type Workload } from "./plan.ts"
import { type Library, libraries, libraryLabel } from "./protocol.ts"
import type { Measured, Processes } from "./processes.ts"

/** One workload's runs: per library, one `Figures` per round (index = round), and the load at each start. */
export interface Collected<L extends string = Library> {
  readonly workload: Workload
  readonly runs: Record<L, Array<Figures>>
  readonly loads: Array<number>
}

/** What a bench runs: its libraries, the workloads of every round, and the long ones run after them. */
export interface Schedule<L extends string> {
  /** Names the run's keys, so runs never meet each other's leftovers. */
  readonly label: string
  readonly libraries: ReadonlyArray<L>
  readonly libraryLabel: Record<L, string>
  readonly rounds: number
  readonly cheap: ReadonlyArray<Workload>
  /** Each run `workload.rounds` times after the cheap ones. */
  readonly expensive: ReadonlyArray<Workload>
  readonly figures: (measured: Measured, workload: Workload) => Figures
  /** Whether `library` runs `workload`; every library runs every workload when absent. */
  readonly runs?: ((library: L, workload: Workload) => boolean) | undefined
}

export const runSchedule = async <L extends string>(
  schedule: Schedule<L>,
  processes: Processes,
  signal: AbortSignal,
  progress: (text: string) => void
): Promise<ReadonlyArray<Collected<L>>> => {
  const runId = Crypto.randomUUID().slice(0, 8)
  // PEERS_ONLY=id,id (e.g. held-10000) reruns some workloads alone; the report then has only those.
  const only = process.env["PEERS_ONLY"]?.split(",").filter((id) => id.length > 0)
  const wanted = (workload: Workload) => only === undefined || only.includes(workload.id)
  const cheapWorkloads = schedule.cheap.filter(wanted)
  const expensiveWorkloads = schedule.expensive.filter(wanted)
  const emptyRuns = (): Record<L, Array<Figures>> => {
    const runs = {} as Record<L, Array<Figures>>
    for (const library of schedule.libraries) runs[library] = []
    return runs
  }
  const collected = [...cheapWorkloads, ...expensiveWorkloads].map((workload): Collected<L> => ({
    workload,
    runs: emptyRuns(),
    loads: []
  }))
  const one = async (entry: Collected<L>, library: L, round: number): Promise<void> => {
    if (signal.aborted) throw new Error("interrupted")
    const { workload } = entry
    if (schedule.runs?.(library, workload) === false) return
    progress(`round ${round + 1}: ${workload.id}, ${schedule.libraryLabel[library]}`)
    entry.loads.push(load1())
    const namespace = `${schedule.label}-${runId}-${workload.id}-${library}-${round}`
    const measured = await processes.measure(library, workload.jobs(namespace), {
      durationMillis: workload.durationMillis,
      resultTimeoutMillis: workload.resultTimeoutMillis,
      oneCpu: workload.oneCpu
    })
    if (measured === undefined) {
      progress("  skipped: could not run the processes on one CPU (taskset, or a single CPU)")
      return
    }
    const figured = schedule.figures(measured, workload)
    entry.runs[library].push(figured)
    if (workload.kind === "held") progress(`  Node CPU ${figured.cpuPercent.toFixed(2)} %, lost ${figured.lost}`)
  }
  for (let round = 0; round < schedule.rounds; round++) {
    for (const [index, entry] of collected.slice(0, cheapWorkloads.length).entries()) {
      for (const library of order(schedule.libraries, round, index)) await one(entry, library, round)
    }
  }
  // Each held workload's rounds one after another, the smaller first: a process that has just held
  // 10,000 locks carries a larger heap into whatever it runs next.
  for (const [index, entry] of collected.slice(cheapWorkloads.length).entries()) {
    for (let round = 0; round < entry.workload.rounds; round++) {
      for (const library of order(schedule.libraries, round, index + 1)) await one(entry, library, round)
    }
  }
  return collected
}

/** The peers bench's schedule. */
export const runAll = (
  plan: Plan,
  processes: Processes,
  signal: AbortSignal,
  progress: (text: string) => void
): Promise<ReadonlyArray<Collected>> =>
  runSchedule(
    {
      label: "peers",
      libraries,
      libraryLabel,
      rounds: plan.rounds,
      cheap: cheap(plan),
      expensive: expensive(plan),
      figures: (measured, workload) => figures(measured, workload.workers)
    },
    processes,
    signal,
    progress
  )
