// The figures of one scenario run and what fails it. Without a fault nothing may be lost or left:
// no LockLost, no overlap, no unexpected error, no key but the fence keys, no fiber, timer or socket
// more after the load than before it, no heap kept after the load, a bounded number of connections
// (three per process at most: the two command connections and the wake-up subscriber, whatever
// the number of waiters or held locks), and every worker exits by itself once its lock layer is closed.
import type { Counts, Probe } from "./protocol.ts"
import { exitBoundMillis, type ScenarioRun } from "./run.ts"
import { connectionsPerProcess } from "./scenarios.ts"
import * as Series from "./series.ts"
import { grownResources } from "./usage.ts"

/** Reachable heap the load may leave behind (JIT code, interned strings, caches), per process. */
export const retainedHeapBound = 4 * 2 ** 20
/** Growth of the reachable heap from a fifth into the load to its end that counts as a leak. */
export const growthBound = (early: number): number => 2 * 2 ** 20 + 0.05 * early

export interface ProcessFigures {
  readonly worker: number
  readonly heap: Series.Summary
  readonly rss: Series.Summary
  readonly cpu: Series.Summary
  readonly liveFibers: Series.Summary
  readonly beforeLoad: Probe
  readonly earlyLoad: Probe
  readonly lateLoad: Probe
  readonly afterLoad: Probe
  readonly beforeLayer: Probe
  readonly afterClose: Probe
  readonly stopMillis: number
  readonly exitedAfterMillis: number | undefined
}

export interface Figures {
  readonly counts: Counts
  readonly processes: ReadonlyArray<ProcessFigures>
  readonly maxClients: number
  readonly maxSubscribers: number
  readonly clientsAtEnd: number
  /** Connections the server accepted from the lock clients after the start (the sampler's excluded). */
  readonly connectionsOpened: number
  readonly serverCpuPercent: number
  /** Scripts the server ran per second, over the samples after the ramp-up. */
  readonly scriptsPerSecond: number
  /** The most keys the server held at a sample (lock keys, fence keys, waiter queues). */
  readonly maxKeys: number
}

const merge = (records: ReadonlyArray<Readonly<Record<string, number>>>): Record<string, number> => {
  const merged: Record<string, number> = {}
  for (const record of records) for (const [what, n] of Object.entries(record)) merged[what] = (merged[what] ?? 0) + n
  return merged
}

const sumCounts = (all: ReadonlyArray<Counts>): Counts => {
  const sum = (field: "calls" | "acquisitions" | "timedOut" | "lockLost" | "overlaps") =>
    all.reduce((total, counts) => total + counts[field], 0)
  return {
    calls: sum("calls"),
    acquisitions: sum("acquisitions"),
    timedOut: sum("timedOut"),
    lockLost: sum("lockLost"),
    lockLostBy: merge(all.map((counts) => counts.lockLostBy)),
    overlaps: sum("overlaps"),
    otherErrors: merge(all.map((counts) => counts.otherErrors)),
    allHeldAfterMillis: Math.max(...all.map((counts) => counts.allHeldAfterMillis))
  }
}

const seconds = (from: number, to: number): number => Math.max(0.001, (to - from) / 1000)

export const figures = (run: ScenarioRun): Figures => {
  const rampMillis = run.plan.durationMillis / 5
  const processes = run.workers.flatMap((w): Array<ProcessFigures> => {
    const r = w.result
    if (r === undefined) return []
    return [
      {
        worker: w.worker,
        heap: Series.summarize(Series.after(w.samples, 0, (s) => s.heapUsed)),
        rss: Series.summarize(Series.after(w.samples, 0, (s) => s.rss)),
        cpu: Series.summarize(Series.after(w.samples, 0, (s) => s.cpuPercent)),
        liveFibers: Series.summarize(Series.after(w.samples, 0, (s) => s.liveFibers)),
        ...r,
        exitedAfterMillis: w.exitedAfterMillis
      }
    ]
  })
  const server = run.server
  const first = server[0]
  const last = server[server.length - 1]
  const steady = server.filter((s) => s.t >= rampMillis && s.t <= run.plan.durationMillis)
  const steadyFirst = steady[0]
  const steadyLast = steady[steady.length - 1]
  return {
    counts: sumCounts(run.workers.flatMap((w) => (w.result === undefined ? [] : [w.result.counts]))),
    processes,
    maxClients: Math.max(0, ...server.map((s) => s.clients)),
    maxSubscribers: Math.max(0, ...server.map((s) => s.subscribers)),
    clientsAtEnd: last?.clients ?? Number.NaN,
    connectionsOpened:
      first === undefined || last === undefined
        ? Number.NaN
        : last.connectionsReceived - first.connectionsReceived - (run.samplerSessions - 1),
    serverCpuPercent:
      first === undefined || last === undefined
        ? Number.NaN
        : (100 * (last.cpuSeconds - first.cpuSeconds)) / seconds(first.t, last.t),
    scriptsPerSecond:
      steadyFirst === undefined || steadyLast === undefined || steadyFirst === steadyLast
        ? Number.NaN
        : (steadyLast.scripts - steadyFirst.scripts) / seconds(steadyFirst.t, steadyLast.t),
    maxKeys: Math.max(0, ...server.map((s) => s.keys))
  }
}

const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`

/** Why the run fails; empty when it passes. */
export const problems = (run: ScenarioRun, f: Figures): Array<string> => {
  const out: Array<string> = [...run.harness]
  const { counts } = f
  const load = run.scenario.load
  for (const w of run.workers) {
    if (w.fatal !== undefined) out.push(`worker ${w.worker} failed: ${w.fatal}`)
    else if (w.result === undefined) out.push(`worker ${w.worker} reported no result (${w.exit})`)
  }
  if (counts.lockLost > 0) {
    const by = Object.entries(counts.lockLostBy).map(([what, n]) => `${n} ${what}`)
    out.push(`${counts.lockLost} LockLost without any fault (phase/reason: ${by.join(", ")})`)
  }
  if (counts.overlaps > 0)
    out.push(`${counts.overlaps} bodies entered while another body of their process held the key`)
  for (const [what, n] of Object.entries(counts.otherErrors)) out.push(`${n} unexpected ${what}`)
  if (counts.acquisitions === 0) out.push("no acquisition")
  if (load._tag === "hold") {
    if (counts.allHeldAfterMillis < 0) out.push(`never held all ${load.locks} locks at once`)
  }
  if (run.keysLeft.others.length > 0) {
    out.push(
      `${run.keysLeft.others.length} keys left in the namespace (fence keys excluded): ${run.keysLeft.others.slice(0, 5).join(", ")}`
    )
  }
  const processCount = run.scenario.workers
  if (f.maxClients > connectionsPerProcess * processCount) {
    out.push(`${f.maxClients} client connections at once, more than ${connectionsPerProcess} per process`)
  }
  if (f.connectionsOpened > connectionsPerProcess * processCount) {
    out.push(`${f.connectionsOpened} connections opened during the run (reconnects?)`)
  }
  if (f.clientsAtEnd > 0) out.push(`${f.clientsAtEnd} client connections still open after the workers exited`)
  // A waiter returns within its waitTimeout; held locks are released (each bounded to 1 s) all at once.
  const waitBound = load._tag === "contend" ? load.waitTimeoutMillis + 2000 : 5000
  for (const p of f.processes) {
    const who = `worker ${p.worker}`
    if (p.afterLoad.liveFibers > p.beforeLoad.liveFibers) {
      out.push(`${who}: ${p.afterLoad.liveFibers - p.beforeLoad.liveFibers} fibers still alive after the load`)
    }
    for (const grown of grownResources(p.beforeLoad.resources, p.afterLoad.resources, connectionsPerProcess))
      out.push(`${who}: more handles after the load: ${grown}`)
    for (const grown of grownResources(p.beforeLayer.resources, p.afterClose.resources))
      out.push(`${who}: handles left after closing: ${grown}`)
    if (p.afterLoad.heapUsed - p.beforeLoad.heapUsed > retainedHeapBound) {
      out.push(`${who}: the load left ${mib(p.afterLoad.heapUsed - p.beforeLoad.heapUsed)} of reachable heap behind`)
    }
    if (p.lateLoad.heapUsed - p.earlyLoad.heapUsed > growthBound(p.earlyLoad.heapUsed)) {
      out.push(`${who}: reachable heap grew ${mib(p.lateLoad.heapUsed - p.earlyLoad.heapUsed)} under steady load`)
    }
    if (p.stopMillis > waitBound) out.push(`${who}: calls took ${p.stopMillis} ms to return after the stop`)
    if (p.exitedAfterMillis === undefined || p.exitedAfterMillis > exitBoundMillis) {
      out.push(`${who}: did not exit by itself within ${exitBoundMillis} ms of closing (a handle left open)`)
    }
  }
  return out
}
