// The semaphores tables: per workload, each library's medians over rounds and its ratio to the
// node-redis baseline semaphore of the same round (median of the per-round ratios), as the peers
// tables give them (peers/report.ts). Nothing here calls a number good or bad.
import { type Figures, medianOf, ratioOf, ratioRange, type Series } from "../peers/analysis.ts"
import { count, fixed, rangeCell, times } from "../peers/report.ts"
import type { Collected } from "../peers/rounds.ts"
import { median, ms, perSecond, table } from "../stats.ts"
import { type Library, libraries, libraryLabel } from "./plan.ts"

type Entry = Collected<Library>
type Figure = (figures: Figures) => number

const series = (entry: Entry, library: Library): Series => ({
  runs: entry.runs[library],
  baseline: entry.runs.baseline
})

/** The median, its ratio to the baseline and the rounds' range of that ratio. */
const againstBaseline = (entry: Entry, library: Library, pick: Figure, cell: (value: number) => string) => {
  const s = series(entry, library)
  return [cell(medianOf(s, pick)), times(ratioOf(s, pick)), rangeCell(ratioRange(s, pick))]
}

const value = (entry: Entry, library: Library, pick: Figure, digits: number): string =>
  fixed(medianOf(series(entry, library), pick), digits)

const worst = (entry: Entry, library: Library, pick: Figure): string =>
  count(Math.max(...entry.runs[library].map(pick)))

/** The libraries that ran the entry's workload (the ceiling runs only the contended ones). */
const ran = (entry: Entry): Array<Library> => libraries.filter((library) => entry.runs[library].length > 0)

const load = (entry: Entry): string => `\n\nMedian load1 at the start of its runs: ${fixed(median(entry.loads), 2)}`

export const uncontendedTable = (entry: Entry): string =>
  table(
    [
      "library",
      "cycles/s",
      "vs baseline",
      "rounds' range",
      "CPU us/cycle",
      "vs baseline",
      "rounds' range",
      "server CPU us/cycle",
      "vs baseline",
      "rounds' range",
      "server calls/cycle",
      "scripts/cycle",
      "most called (per cycle)",
      "failures"
    ],
    ran(entry).map((library) => [
      libraryLabel[library],
      ...againstBaseline(entry, library, (f) => f.perSecond, perSecond),
      ...againstBaseline(
        entry,
        library,
        (f) => f.cpuMicrosPer,
        (v) => fixed(v, 0)
      ),
      ...againstBaseline(
        entry,
        library,
        (f) => f.serverCpuMicrosPer,
        (v) => fixed(v, 1)
      ),
      value(entry, library, (f) => f.callsPer, 2),
      value(entry, library, (f) => f.scriptsPer, 2),
      entry.runs[library].at(-1)?.topCalls ?? "-",
      worst(entry, library, (f) => f.failures)
    ])
  ) + load(entry)

export const contendedTable = (entry: Entry): string =>
  table(
    [
      "library",
      "acq/s",
      "vs baseline",
      "rounds' range",
      "handoff p50 ms",
      "handoff p99 ms",
      "handoffs",
      "requests/acq",
      "server calls/acq",
      "scripts/acq",
      "most called (per acq)",
      "least/mean",
      "CPU us/acq",
      "server CPU us/acq",
      "lost",
      "over the limit"
    ],
    ran(entry).map((library) => [
      libraryLabel[library],
      ...againstBaseline(entry, library, (f) => f.perSecond, perSecond),
      ms(medianOf(series(entry, library), (f) => f.handoffP50)),
      ms(medianOf(series(entry, library), (f) => f.handoffP99)),
      value(entry, library, (f) => f.handoffs, 0),
      value(entry, library, (f) => f.requestsPer, 1),
      value(entry, library, (f) => f.callsPer, 1),
      value(entry, library, (f) => f.scriptsPer, 1),
      entry.runs[library].at(-1)?.topCalls ?? "-",
      value(entry, library, (f) => f.leastOverMean, 2),
      value(entry, library, (f) => f.cpuMicrosPer, 0),
      value(entry, library, (f) => f.serverCpuMicrosPer, 0),
      worst(entry, library, (f) => f.lost),
      worst(entry, library, (f) => f.overlaps)
    ])
  ) + load(entry)

export const heldTable = (entry: Entry): string =>
  table(
    [
      "library",
      "rounds",
      "held",
      "acquiring all s",
      "Node CPU %",
      "vs baseline",
      "rounds' range",
      "of which GC %",
      "heap bytes/permit",
      "collection after acquiring, ms",
      "lost"
    ],
    ran(entry).map((library) => [
      libraryLabel[library],
      String(entry.runs[library].length),
      value(entry, library, (f) => f.held, 0),
      fixed(medianOf(series(entry, library), (f) => f.acquireMillis) / 1000, 2),
      ...againstBaseline(
        entry,
        library,
        (f) => f.cpuPercent,
        (v) => fixed(v, 1)
      ),
      value(entry, library, (f) => f.gcPercent, 2),
      value(entry, library, (f) => f.heapBytesPer, 0),
      value(entry, library, (f) => f.collectMillis, 1),
      worst(entry, library, (f) => f.lost)
    ])
  ) + load(entry)
