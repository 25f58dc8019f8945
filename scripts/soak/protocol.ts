// What the soak's parent and its worker processes say to each other: the worker's parameters (one
// JSON argument), "start" on the worker's stdin, and one JSON object a line on its stdout: "starting", "ready"
// once its lock layer is built, a "sample" every few seconds while the load runs, then one "result"
// with its counts and the before/after probes. Anything else a worker prints is a log line.
import * as Schema from "effect/Schema"

export const Load = Schema.Union([
  /** `waiters` fibers loop `withLock(key, { waitTimeout })` on one key around a short body. */
  Schema.TaggedStruct("contend", {
    key: Schema.String,
    waiters: Schema.Int,
    waitTimeoutMillis: Schema.Int,
    bodyMinMillis: Schema.Int,
    bodyMaxMillis: Schema.Int
  }),
  /**
   * `locks` fibers each hold a lock of their own, their bodies sleeping until the run ends; at most
   * `acquireConcurrency` acquisitions are under way at once (0: all at once).
   */
  Schema.TaggedStruct("hold", { locks: Schema.Int, waitTimeoutMillis: Schema.Int, acquireConcurrency: Schema.Int })
])
export type Load = typeof Load.Type

export const WorkerParams = Schema.Struct({
  worker: Schema.Int,
  url: Schema.String,
  namespace: Schema.String,
  leaseMillis: Schema.Int,
  load: Load,
  /** How long the load runs after "start". */
  durationMillis: Schema.Int,
  sampleMillis: Schema.Int
})
export type WorkerParams = typeof WorkerParams.Type
export const WorkerParamsJson = Schema.fromJsonString(WorkerParams)

/** One reading of the worker process, taken every `sampleMillis` while the load runs. */
export interface Sample {
  /** Milliseconds since the load started. */
  readonly t: number
  readonly heapUsed: number
  readonly rss: number
  /** Node CPU (user + system) since the previous sample, in % of one core. */
  readonly cpuPercent: number
  readonly liveFibers: number
  /** Handles and requests that keep the event loop alive (timers, sockets). */
  readonly resources: number
  /** Bodies running now (hold: locks held). */
  readonly inBody: number
}

/** What a process looks like at one instant, after a full GC. */
export interface Probe {
  readonly heapUsed: number
  readonly liveFibers: number
  /** `process.getActiveResourcesInfo()`, counted by kind (Timeout, TCPWRAP, ...). */
  readonly resources: Readonly<Record<string, number>>
}

export interface Counts {
  readonly calls: number
  readonly acquisitions: number
  readonly timedOut: number
  readonly lockLost: number
  /** LockLost by `phase/reason` (e.g. `acquire/expired`). */
  readonly lockLostBy: Readonly<Record<string, number>>
  /** Other failures, by tag and detail (none expected). */
  readonly otherErrors: Readonly<Record<string, number>>
  /** Times a body entered while another body of this process held the one key (contend only). */
  readonly overlaps: number
  /** Hold only: milliseconds from the start until every lock was held (-1 if never). */
  readonly allHeldAfterMillis: number
}

export interface WorkerResult {
  readonly counts: Counts
  /** Before the lock layer was built. */
  readonly beforeLayer: Probe
  /** Layer built, before the load. */
  readonly beforeLoad: Probe
  /** A fifth into the load (or once it ramped up, if later), and at its end (still under load). */
  readonly earlyLoad: Probe
  readonly lateLoad: Probe
  /** Every call returned and the client went idle (its renewal scheduler lingers one period). */
  readonly afterLoad: Probe
  /** The lock layer (its connections) closed. */
  readonly afterClose: Probe
  /** How long the calls took to return after the load was told to stop. */
  readonly stopMillis: number
}

export type WorkerLine =
  // First thing a worker writes: a pipe counts as a handle only once written to, so every probe comes after it.
  | { readonly _tag: "starting"; readonly pid: number }
  | { readonly _tag: "ready"; readonly pid: number }
  | { readonly _tag: "sample"; readonly sample: Sample }
  | { readonly _tag: "result"; readonly result: WorkerResult }
  | { readonly _tag: "fatal"; readonly message: string }

export const parseLine = (line: string): WorkerLine | undefined => {
  if (!line.startsWith("{")) return undefined
  try {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null && "_tag" in value ? (value as WorkerLine) : undefined
  } catch {
    return undefined
  }
}
