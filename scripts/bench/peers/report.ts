// The peers tables: per workload, each library's medians over rounds and its ratio to the node-redis
// baseline of the same round (median of the per-round ratios), then one headline table of the figures
// the performance work is judged by. Nothing here calls a number good or bad.
import { medianOf, rangeOf, ratioOf, ratioRange, ratiosBetween, type Figures, type Series } from "./analysis.ts"
import { median, ms, perSecond, table } from "../stats.ts"
import { type Library, libraries, libraryLabel } from "./protocol.ts"
import type { Collected } from "./rounds.ts"

const series = (entry: Collected, library: Library): Series => ({
  runs: entry.runs[library],
  baseline: entry.runs.baseline
})

/** A per-round median ratio as "1.23x". */
export const times = (value: number): string => (Number.isFinite(value) ? `${value.toFixed(2)}x` : "-")

/** A rounds' range as "0.95-1.10". */
export const rangeCell = ([low, high]: readonly [number, number]): string =>
  Number.isFinite(low) ? `${low.toFixed(2)}-${high.toFixed(2)}` : "-"

const spread = (entry: Collected, library: Library, pick: (figures: Figures) => number): string =>
  rangeCell(ratioRange(series(entry, library), pick))

export const fixed = (value: number, digits: number): string => (Number.isFinite(value) ? value.toFixed(digits) : "-")

export const count = (value: number): string => (Number.isFinite(value) ? String(Math.round(value)) : "-")

const loadCell = (entry: Collected): string => fixed(median(entry.loads), 2)

const perSecondOf = (f: Figures) => f.perSecond

/** The peers, as opposed to the yardsticks (the baseline, and the lock's own protocol sent raw). */
const peers: ReadonlyArray<Library> = ["redlock", "sesame", "semaphore"]

/**
 * `@sage/lock`'s rate over each peer's in the same round: the median and the rounds' range, e.g.
 * "redlock 5 1.04x (0.95-1.10)".
 */
const againstPeers = (entry: Collected, ours: Library = "sage"): string =>
  peers
    .map((peer) => {
      const ratios = ratiosBetween(entry.runs[ours], entry.runs[peer], perSecondOf)
      return `${libraryLabel[peer]} ${times(median(ratios))} (${rangeCell(rangeOf(ratios))})`
    })
    .join(", ")
const cpuOf = (f: Figures) => f.cpuMicrosPer
const serverCpuOf = (f: Figures) => f.serverCpuMicrosPer

export const uncontendedTable = (entry: Collected): string =>
  table(
    [
      "library",
      "cycles/s",
      "vs baseline",
      "rounds' range",
      "CPU us/cycle",
      "vs baseline",
      "CPU rounds' range",
      "GC us/cycle",
      "full GCs (max of rounds)",
      "server CPU us/cycle",
      "vs baseline",
      "server calls/cycle",
      "scripts/cycle",
      "most called (per cycle)",
      "failures"
    ],
    libraries.map((library) => {
      const s = series(entry, library)
      return [
        libraryLabel[library],
        perSecond(medianOf(s, perSecondOf)),
        times(ratioOf(s, perSecondOf)),
        spread(entry, library, perSecondOf),
        fixed(medianOf(s, cpuOf), 0),
        times(ratioOf(s, cpuOf)),
        spread(entry, library, cpuOf),
        fixed(
          medianOf(s, (f) => f.gcMicrosPer),
          2
        ),
        count(Math.max(...entry.runs[library].map((f) => f.fullGcs))),
        fixed(medianOf(s, serverCpuOf), 1),
        times(ratioOf(s, serverCpuOf)),
        fixed(
          medianOf(s, (f) => f.callsPer),
          2
        ),
        fixed(
          medianOf(s, (f) => f.scriptsPer),
          2
        ),
        entry.runs[library].at(-1)?.topCalls ?? "-",
        count(medianOf(s, (f) => f.failures))
      ]
    })
  ) +
  `\n\n@sage/lock's cycles/s over each peer's in the same round (median, rounds' range): ${againstPeers(entry)}` +
  `; over ioredis: ${againstPeers(entry, "sage-ioredis")}` +
  `\n\nMedian load1 at the start of its runs: ${loadCell(entry)}`

export const contendedTable = (entry: Collected): string =>
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
      "overlaps"
    ],
    libraries.map((library) => {
      const s = series(entry, library)
      return [
        libraryLabel[library],
        perSecond(medianOf(s, perSecondOf)),
        times(ratioOf(s, perSecondOf)),
        spread(entry, library, perSecondOf),
        ms(medianOf(s, (f) => f.handoffP50)),
        ms(medianOf(s, (f) => f.handoffP99)),
        count(medianOf(s, (f) => f.handoffs)),
        fixed(
          medianOf(s, (f) => f.requestsPer),
          1
        ),
        fixed(
          medianOf(s, (f) => f.callsPer),
          1
        ),
        fixed(
          medianOf(s, (f) => f.scriptsPer),
          1
        ),
        entry.runs[library].at(-1)?.topCalls ?? "-",
        fixed(
          medianOf(s, (f) => f.leastOverMean),
          2
        ),
        fixed(medianOf(s, cpuOf), 0),
        fixed(medianOf(s, serverCpuOf), 0),
        count(Math.max(...entry.runs[library].map((f) => f.lost))),
        count(Math.max(...entry.runs[library].map((f) => f.overlaps)))
      ]
    })
  ) + `\n\nMedian load1 at the start of its runs: ${loadCell(entry)}`

export const heldTable = (entries: ReadonlyArray<Collected>): string =>
  table(
    [
      "library",
      "locks",
      "rounds",
      "held",
      "acquiring all s",
      "Node CPU %",
      "vs baseline",
      "rounds' range",
      "of which GC %",
      "full GCs (max of rounds)",
      "heap bytes/lock",
      "collection after acquiring, ms",
      "lost",
      "load1"
    ],
    entries.flatMap((entry) =>
      libraries.map((library) => {
        const s = series(entry, library)
        const workload = entry.workload.jobs("")[0]?.workload
        return [
          libraryLabel[library],
          workload?._tag === "held" ? String(workload.count) : "?",
          String(entry.runs[library].length),
          count(medianOf(s, (f) => f.held)),
          fixed(medianOf(s, (f) => f.acquireMillis) / 1000, 2),
          fixed(
            medianOf(s, (f) => f.cpuPercent),
            1
          ),
          times(ratioOf(s, (f) => f.cpuPercent)),
          spread(entry, library, (f) => f.cpuPercent),
          fixed(
            medianOf(s, (f) => f.gcPercent),
            2
          ),
          count(Math.max(...entry.runs[library].map((f) => f.fullGcs))),
          count(medianOf(s, (f) => f.heapBytesPer)),
          fixed(
            medianOf(s, (f) => f.collectMillis),
            1
          ),
          count(Math.max(...entry.runs[library].map((f) => f.lost))),
          loadCell(entry)
        ]
      })
    )
  )

/** The figures the performance issue sets targets on, each as a ratio to the baseline (or a plain value). */
export const headlineTable = (collected: ReadonlyArray<Collected>): string => {
  const find = (id: string) => collected.find((entry) => entry.workload.id === id)
  const ratioCell = (id: string, library: Library, pick: (f: Figures) => number): string => {
    const entry = find(id)
    return entry === undefined ? "-" : times(ratioOf(series(entry, library), pick))
  }
  const valueCell = (id: string, library: Library, pick: (f: Figures) => number, digits: number): string => {
    const entry = find(id)
    return entry === undefined ? "-" : fixed(medianOf(series(entry, library), pick), digits)
  }
  const least = (library: Library): string =>
    ["contended-1p-think10", "contended-1p-think0", "contended-4p-think10", "contended-4p-think0"]
      .map((id) => valueCell(id, library, (f) => f.leastOverMean, 2))
      .join(" / ")
  const heldIds = collected.filter((entry) => entry.workload.kind === "held").map((entry) => entry.workload.id)
  return table(
    [
      "library",
      "c1 cycles/s",
      "c1 on one CPU cycles/s",
      "c64 cycles/s",
      "c1 CPU/cycle",
      "c64 CPU/cycle",
      "c64 server CPU/cycle",
      "1p acq/s",
      "1p handoff p50",
      "1p handoff p99",
      "4p acq/s",
      "4p handoff p50",
      "requests/acq 1p / 4p",
      "least/mean 1p-10 / 1p-0 / 4p-10 / 4p-0",
      ...heldIds.map((id) => `${id.replace("held-", "")} held: CPU % / lost`)
    ],
    libraries.map((library) => [
      libraryLabel[library],
      ratioCell("uncontended-1", library, perSecondOf),
      ratioCell("uncontended-1-onecpu", library, perSecondOf),
      ratioCell("uncontended-64", library, perSecondOf),
      ratioCell("uncontended-1", library, cpuOf),
      ratioCell("uncontended-64", library, cpuOf),
      ratioCell("uncontended-64", library, serverCpuOf),
      ratioCell("contended-1p-think10", library, perSecondOf),
      ratioCell("contended-1p-think10", library, (f) => f.handoffP50),
      ratioCell("contended-1p-think10", library, (f) => f.handoffP99),
      ratioCell("contended-4p-think10", library, perSecondOf),
      ratioCell("contended-4p-think10", library, (f) => f.handoffP50),
      `${valueCell("contended-1p-think10", library, (f) => f.requestsPer, 1)} / ` +
        valueCell("contended-4p-think10", library, (f) => f.requestsPer, 1),
      least(library),
      ...heldIds.map(
        (id) =>
          `${valueCell(id, library, (f) => f.cpuPercent, 1)} / ` +
          count(Math.max(...(find(id)?.runs[library].map((f) => f.lost) ?? [Number.NaN])))
      )
    ])
  )
}
