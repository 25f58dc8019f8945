// From what the workers and the server reported to the figures in the tables: one `Figures` per run,
// then medians over rounds, with every ratio taken against the baseline of the same round first.
import { median, summarize } from "../stats.ts"
import { ownCommands, scriptCommands } from "./counters.ts"
import type { AcquisitionRecord } from "./protocol.ts"
import type { Measured } from "./processes.ts"

/** The numbers one run yields; a workload uses the ones that apply (NaN elsewhere). */
export interface Figures {
  /** Completed cycles (uncontended) or acquisitions in the window (contended) per second. */
  readonly perSecond: number
  /** Node CPU (user + system, all worker processes) per cycle or acquisition, microseconds. */
  readonly cpuMicrosPer: number
  /** Uncontended: the collector's time per cycle (us), and full collections in the window (gc.ts). */
  readonly gcMicrosPer: number
  readonly fullGcs: number
  /** The server's CPU (user + system) per cycle or acquisition, microseconds. */
  readonly serverCpuMicrosPer: number
  /** Server command calls per cycle or acquisition (scripts' inner calls included). */
  readonly callsPer: number
  /** Requests the clients sent per acquisition (contended only; requests.ts). */
  readonly requestsPer: number
  /** EVAL/EVALSHA/FCALL calls per cycle or acquisition: each is one request. */
  readonly scriptsPer: number
  /** The three most frequent commands, "evalsha 2.1, set 1.0, get 1.0" per cycle or acquisition. */
  readonly topCalls: string
  readonly handoffs: number
  readonly handoffP50: number
  readonly handoffP99: number
  /** Fewest acquisitions of one worker over the mean per worker (1 = perfectly even). */
  readonly leastOverMean: number
  /** Bodies that began before the previous one ended: must be 0 (a check of the whole setup). */
  readonly overlaps: number
  readonly lost: number
  /** Calls that timed out or were lost where none should (uncontended). */
  readonly failures: number
  /** Held locks: how many were held, how long acquiring them took, Node CPU % of one core. */
  readonly held: number
  readonly acquireMillis: number
  readonly cpuPercent: number
  /** Held locks: the collector's time in the CPU window, as a percentage of one core (part of `cpuPercent`). */
  readonly gcPercent: number
  /** Held locks: heap kept per held lock (bytes), and the full collection after acquiring them (ms of CPU). */
  readonly heapBytesPer: number
  readonly collectMillis: number
}

const empty: Figures = {
  perSecond: Number.NaN,
  cpuMicrosPer: Number.NaN,
  gcMicrosPer: Number.NaN,
  fullGcs: Number.NaN,
  serverCpuMicrosPer: Number.NaN,
  callsPer: Number.NaN,
  requestsPer: Number.NaN,
  scriptsPer: Number.NaN,
  topCalls: "",
  handoffs: Number.NaN,
  handoffP50: Number.NaN,
  handoffP99: Number.NaN,
  leastOverMean: Number.NaN,
  overlaps: Number.NaN,
  lost: Number.NaN,
  failures: Number.NaN,
  held: Number.NaN,
  acquireMillis: Number.NaN,
  cpuPercent: Number.NaN,
  gcPercent: Number.NaN,
  heapBytesPer: Number.NaN,
  collectMillis: Number.NaN
}

const callFigures = (calls: ReadonlyMap<string, number>, per: number) => {
  const counted = [...calls].filter(([command, count]) => !ownCommands.has(command) && count > 0)
  const total = counted.reduce((sum, [, count]) => sum + count, 0)
  const scripts = counted.filter(([command]) => scriptCommands.has(command)).reduce((sum, [, count]) => sum + count, 0)
  const topCalls = counted
    .toSorted((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([command, count]) => `${command} ${(count / per).toFixed(1)}`)
    .join(", ")
  return { callsPer: total / per, scriptsPer: scripts / per, topCalls }
}

/** Handoffs to a waiter, fairness and overlaps from the merged acquisitions of every worker. */
export const contention = (records: ReadonlyArray<AcquisitionRecord>, workers: ReadonlyArray<number>) => {
  const sorted = records.toSorted((a, b) => a[2] - b[2])
  const handoffs: Array<number> = []
  let overlaps = 0
  for (let i = 1; i < sorted.length; i++) {
    const [previousWorker, , , released] = sorted[i - 1]!
    const [worker, requested, acquired] = sorted[i]!
    if (acquired < released) overlaps++
    // A handoff to a waiter: another worker, already asking when the holder let go.
    else if (worker !== previousWorker && requested <= released) handoffs.push(acquired - released)
  }
  const perWorker = workers.map((worker) => records.filter((record) => record[0] === worker).length)
  const mean = records.length / workers.length
  const summary = summarize(handoffs)
  return {
    handoffs: handoffs.length,
    handoffP50: summary.p50,
    handoffP99: summary.p99,
    leastOverMean: mean > 0 ? Math.min(...perWorker) / mean : Number.NaN,
    overlaps
  }
}

const sum = (values: ReadonlyArray<number>): number => values.reduce((total, value) => total + value, 0)

/** The figures of one run; `workers` are the contended workload's global worker ids. */
export const figures = (run: Measured, workers: ReadonlyArray<number>): Figures => {
  const results = run.results
  const cpu = sum(results.map((result) => result.cpuMicros))
  const uncontended = results.flatMap((r) => (r._tag === "uncontended" ? [r] : []))
  const contended = results.flatMap((r) => (r._tag === "contended" ? [r] : []))
  const held = results.flatMap((r) => (r._tag === "held" ? [r] : []))
  if (uncontended.length > 0) {
    const cycles = sum(uncontended.map((r) => r.cycles))
    const elapsed = Math.max(...uncontended.map((r) => r.elapsedMillis))
    return {
      ...empty,
      ...callFigures(run.calls, cycles),
      perSecond: (cycles * 1000) / elapsed,
      cpuMicrosPer: cpu / cycles,
      gcMicrosPer: (sum(uncontended.map((r) => r.gcMillis)) * 1000) / cycles,
      fullGcs: sum(uncontended.map((r) => r.fullGcs)),
      serverCpuMicrosPer: run.serverCpuMicros / cycles,
      failures: sum(uncontended.map((r) => r.failures))
    }
  }
  if (contended.length > 0) {
    // Only acquisitions inside the common window count; one that slipped past `until` is dropped.
    const records = contended.flatMap((r) => r.records).filter((r) => r[2] >= run.from && r[2] <= run.until)
    return {
      ...empty,
      ...callFigures(run.calls, records.length),
      ...contention(records, workers),
      perSecond: (records.length * 1000) / (run.until - run.from),
      requestsPer: sum(contended.map((r) => r.requests)) / records.length,
      cpuMicrosPer: cpu / records.length,
      serverCpuMicrosPer: run.serverCpuMicros / records.length,
      lost: sum(contended.map((r) => r.lost))
    }
  }
  return {
    ...empty,
    held: sum(held.map((r) => r.acquired)),
    lost: sum(held.map((r) => r.lost)),
    acquireMillis: Math.max(...held.map((r) => r.acquireMillis)),
    cpuPercent: (100 * cpu) / (1000 * Math.max(...held.map((r) => r.holdMillis))),
    gcPercent: (100 * sum(held.map((r) => r.gcMillis))) / Math.max(...held.map((r) => r.holdMillis)),
    fullGcs: sum(held.map((r) => r.fullGcs)),
    heapBytesPer: sum(held.map((r) => r.heapBytes)) / sum(held.map((r) => r.acquired)),
    collectMillis: sum(held.map((r) => r.collectMicros)) / 1000
  }
}

/** One library's runs of one workload, round by round, with the baseline's runs of the same rounds. */
export interface Series {
  readonly runs: ReadonlyArray<Figures>
  readonly baseline: ReadonlyArray<Figures>
}

/** The median over rounds of one figure. */
export const medianOf = (series: Series, pick: (figures: Figures) => number): number => median(series.runs.map(pick))

/**
 * `numerator`'s figure over `denominator`'s in the same round, for every round both ran: how two
 * libraries compare without going through the baseline (a tie of two medians against the baseline
 * says nothing about which was ahead round by round).
 */
export const ratiosBetween = (
  numerator: ReadonlyArray<Figures>,
  denominator: ReadonlyArray<Figures>,
  pick: (figures: Figures) => number
): Array<number> =>
  numerator.flatMap((figures, round) => {
    const other = denominator[round]
    return other === undefined ? [] : [pick(figures) / pick(other)]
  })

/** The smallest and largest finite ratio, to show how much the rounds disagreed (NaN when none). */
export const rangeOf = (ratios: ReadonlyArray<number>): readonly [number, number] => {
  const finite = ratios.filter(Number.isFinite)
  return finite.length === 0 ? [Number.NaN, Number.NaN] : [Math.min(...finite), Math.max(...finite)]
}

/** The median over rounds of (this library / the baseline in the same round). */
export const ratioOf = (series: Series, pick: (figures: Figures) => number): number =>
  median(ratiosBetween(series.runs, series.baseline, pick))

/** The smallest and largest per-round ratio to the baseline. */
export const ratioRange = (series: Series, pick: (figures: Figures) => number): readonly [number, number] =>
  rangeOf(ratiosBetween(series.runs, series.baseline, pick))
