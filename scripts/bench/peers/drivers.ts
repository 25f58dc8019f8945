// The three workloads, written once for every Promise-based lock (the peers and the baseline). Each
// library only supplies `withLock`; the loops, timestamps and CPU readings are the same code for all.
// @sage/lock runs the same workloads written in Effect (sage.ts), as its users would write them.
import { clockMillis } from "./clock.ts"
import { watchGc } from "./gc.ts"
import type { AcquisitionRecord, Result, Workload } from "./protocol.ts"
import * as Requests from "./requests.ts"

/** How one locked call ended: body ran and released; not acquired in time; or the library reported a loss. */
export type Outcome = "ok" | "timeout" | "lost"

/** A lock as the drivers see it: anything else thrown is a failure of the run. */
export interface PromiseLock {
  /**
   * Waits up to `waitMillis` for `key`, runs `body` while keeping the lock, releases it. "lost" when
   * the library said (during the body or at release) that the lock was no longer held.
   */
  readonly withLock: (key: string, waitMillis: number, body: () => Promise<void>) => Promise<Outcome>
  readonly close: () => Promise<void>
}

export const sleep = (millis: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, millis))

/** Waits until `at` on `clockMillis`: the parent's common start. */
export const sleepUntil = (at: number): Promise<void> => sleep(Math.max(0, at - clockMillis()))

/** User + system CPU of this process since `since`, in microseconds (sage.ts measures the same way). */
export const cpuMicros = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since)
  return used.user + used.system
}

export const range = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

/** A generous wait for calls that should never wait: a timeout there is counted as a failure. */
const uncontendedWaitMillis = 20_000

const noop = async (): Promise<void> => {}

const loopUntil = async (
  lock: PromiseLock,
  key: string,
  until: number,
  count: { cycles: number; failures: number }
) => {
  while (clockMillis() < until) {
    const outcome = await lock.withLock(key, uncontendedWaitMillis, noop)
    if (outcome === "ok") count.cycles++
    else count.failures++
  }
}

/** `concurrency` loops, each on its own key, until `until`. */
export const uncontended = async (
  lock: PromiseLock,
  options: { readonly prefix: string; readonly concurrency: number },
  until: number
): Promise<Result> => {
  const count = { cycles: 0, failures: 0 }
  const gc = watchGc()
  const cpu = process.cpuUsage()
  const start = clockMillis()
  await Promise.all(range(options.concurrency).map((i) => loopUntil(lock, `${options.prefix}:${i}`, until, count)))
  return {
    _tag: "uncontended",
    cycles: count.cycles,
    elapsedMillis: clockMillis() - start,
    cpuMicros: cpuMicros(cpu),
    ...gc(),
    failures: count.failures
  }
}

/**
 * One worker on the shared key: request, hold for `holdMillis`, release, think for `thinkMillis`, until
 * `until`. The wait budget of each call is what is left of the window, so a worker starved at the end
 * gives up at `until` instead of stretching the run.
 */
const contender = async (
  lock: PromiseLock,
  worker: number,
  options: { readonly key: string; readonly holdMillis: number; readonly thinkMillis: number },
  until: number,
  into: { readonly records: Array<AcquisitionRecord>; lost: number }
): Promise<void> => {
  for (;;) {
    const requested = clockMillis()
    if (requested >= until) return
    let acquired = 0
    let released = 0
    const outcome = await lock.withLock(options.key, until - requested, async () => {
      acquired = clockMillis()
      await sleep(options.holdMillis)
      released = clockMillis()
    })
    if (acquired > 0) into.records.push([worker, requested, acquired, released])
    if (outcome === "lost") into.lost++
    if (outcome === "timeout") return
    if (options.thinkMillis > 0) await sleep(options.thinkMillis)
  }
}

export const contended = async (
  lock: PromiseLock,
  options: {
    readonly key: string
    readonly workers: ReadonlyArray<number>
    readonly holdMillis: number
    readonly thinkMillis: number
  },
  until: number
): Promise<Result> => {
  const into = { records: [] as Array<AcquisitionRecord>, lost: 0 }
  const cpu = process.cpuUsage()
  const requests = Requests.sent()
  await Promise.all(options.workers.map((worker) => contender(lock, worker, options, until, into)))
  return {
    _tag: "contended",
    records: into.records,
    requests: Requests.sent() - requests,
    cpuMicros: cpuMicros(cpu),
    lost: into.lost
  }
}

/** A promise that `open` resolves: every held body waits on it. */
const gate = () => {
  const { promise, resolve } = Promise.withResolvers<void>()
  return { opened: promise, open: () => resolve() }
}

/**
 * A full garbage collection, as a held workload starts and again once all its locks are held, so the
 * CPU window measures keeping the locks rather than collecting what acquiring them left behind (which
 * V8 would otherwise do at moments of its own, inside the window or not). The second collection's CPU
 * and the heap the held locks keep are reported on their own. Workers run with `--expose-gc`
 * (processes.ts).
 */
export const collectGarbage = (): { readonly heapUsed: number; readonly cpuMicros: number } => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("the held workloads need the worker to run with --expose-gc")
  const cpu = process.cpuUsage()
  gc()
  return { heapUsed: process.memoryUsage().heapUsed, cpuMicros: cpuMicros(cpu) }
}

/** How long a held workload waits after its second collection, so the collector's after-work is done. */
export const settleMillis = 1000

/** The key of held call `i`: one key per call for a lock, one per `limit` calls for a semaphore. */
export const heldKey = (prefix: string, i: number, limit: number | undefined): string =>
  `${prefix}:${Math.floor(i / (limit ?? 1))}`

/**
 * `count` concurrent calls on distinct keys (or `limit` a key) whose bodies wait for the gate. Once
 * all are held (or the acquire budget is spent) and the heap is collected, the CPU window of
 * `holdMillis` runs, then the gate opens and all release.
 */
export const held = async (
  lock: PromiseLock,
  options: {
    readonly prefix: string
    readonly count: number
    readonly holdMillis: number
    readonly acquireBudgetMillis: number
    readonly limit?: number | undefined
  }
): Promise<Result> => {
  const heapBefore = collectGarbage().heapUsed
  const start = clockMillis()
  const release = gate()
  const allHeld = gate()
  let acquired = 0
  let lost = 0
  const calls = range(options.count).map(async (i) => {
    const outcome = await lock.withLock(
      heldKey(options.prefix, i, options.limit),
      options.acquireBudgetMillis,
      async () => {
        if (++acquired === options.count) allHeld.open()
        await release.opened
      }
    )
    if (outcome === "lost") lost++
  })
  const budget = setTimeout(allHeld.open, options.acquireBudgetMillis)
  await allHeld.opened
  clearTimeout(budget)
  const acquireMillis = clockMillis() - start
  const collected = collectGarbage()
  await sleep(settleMillis)
  const gc = watchGc()
  const cpu = process.cpuUsage()
  const windowStart = clockMillis()
  await sleep(options.holdMillis)
  const cpuUsed = cpuMicros(cpu)
  const holdMillis = clockMillis() - windowStart
  const collections = gc()
  release.open()
  await Promise.all(calls)
  return {
    _tag: "held",
    requested: options.count,
    acquired,
    acquireMillis,
    holdMillis,
    cpuMicros: cpuUsed,
    ...collections,
    heapBytes: collected.heapUsed - heapBefore,
    collectMicros: collected.cpuMicros,
    lost
  }
}

/** The held workload warms up with this many uncontended loops for this long. */
export const heldWarmupConcurrency = 16
export const heldWarmupMillis = 500

/** What a worker process drives: one library, connected once, warmed, measured, closed. */
export interface Runner {
  /** Untimed: the workload's calls on private keys under `prefix`, so the window starts with warm code. */
  readonly warm: (workload: Workload, prefix: string) => Promise<void>
  /** The measured workload; keys under `prefix`, loops end at `until` (on `clockMillis`). */
  readonly run: (workload: Workload, prefix: string, until: number) => Promise<Result>
  readonly close: () => Promise<void>
}

const warm = async (lock: PromiseLock, workload: Workload, prefix: string): Promise<void> => {
  switch (workload._tag) {
    case "uncontended":
      await uncontended(lock, { prefix, concurrency: workload.concurrency }, clockMillis() + workload.warmupMillis)
      return
    case "contended":
      // Each worker alone on a private key: the code path is warm before the shared key is touched.
      await Promise.all(
        workload.workers.map(async (_, i) => {
          for (let n = 0; n < workload.warmupCycles; n++) {
            await lock.withLock(`${prefix}:${i}`, uncontendedWaitMillis, noop)
          }
        })
      )
      return
    case "held":
      await uncontended(lock, { prefix, concurrency: heldWarmupConcurrency }, clockMillis() + heldWarmupMillis)
  }
}

/** Builds the runner of `library` for one lease: what a worker loads (worker.ts). */
export type Load = (library: string, url: string, leaseMillis: number) => Promise<Runner>

/** The three workloads over a Promise lock. */
export const runner = (lock: PromiseLock): Runner => ({
  warm: (workload, prefix) => warm(lock, workload, prefix),
  run: (workload, prefix, until) => {
    switch (workload._tag) {
      case "uncontended":
        return uncontended(lock, { prefix, concurrency: workload.concurrency }, until)
      case "contended":
        return contended(lock, workload, until)
      case "held":
        return held(lock, { prefix, ...workload })
    }
  },
  close: () => lock.close()
})
