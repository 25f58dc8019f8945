// The calls of a run as the checker sees them: assembled from the workers' lines alone, plus the
// parent's record of which worker it paused or killed when. Shared by checker.ts (counts, overlaps,
// hangs), history.ts (the grants of each key in order) and permits.ts (a semaphore's permits held).
import type { Outcome, WorkerLine } from "./protocol.ts"

/**
 * One `withLock`, `withPermits` or election call (campaign, lead, resign) as its worker reported it
 * (times in microseconds on the shared monotonic clock).
 */
export interface Call {
  readonly id: string
  readonly worker: number
  readonly key: string
  readonly begin: number
  /** A semaphore's call: the permits it asks for (and its body holds) of the semaphore's `limit`. */
  readonly permits?: { readonly count: number; readonly limit: number } | undefined
  entered?: number
  /** The fencing token the body saw (`Lease.fencingToken`; an election's term). */
  token?: number
  /** An election call's term, written when its campaign returned (before its body entered). */
  term?: number
  left?: number
  ended?: number
  outcome?: Outcome
  detail?: string
}

/** What the parent did to a worker process: paused it from..to, or killed it at `from` (then `to` is Infinity). */
export interface WorkerFault {
  readonly worker: number
  readonly from: number
  readonly to: number
}

export const assembleCalls = (
  lines: ReadonlyArray<{ readonly worker: number; readonly line: WorkerLine }>
): Map<string, Call> => {
  const calls = new Map<string, Call>()
  for (const { worker, line } of lines) {
    switch (line[0]) {
      case "B":
        calls.set(line[1], {
          id: line[1],
          worker,
          key: line[2],
          begin: line[3],
          permits: line.length === 6 ? { count: line[4], limit: line[5] } : undefined
        })
        break
      case "E": {
        const call = calls.get(line[1])
        if (call !== undefined) {
          call.entered = line[2]
          call.token = line[4]
        }
        break
      }
      case "L": {
        const call = calls.get(line[1])
        if (call !== undefined) call.left = line[2]
        break
      }
      case "G": {
        const call = calls.get(line[1])
        if (call !== undefined) call.term = line[3]
        break
      }
      case "X": {
        const call = calls.get(line[1])
        if (call !== undefined) {
          call.ended = line[2]
          call.outcome = line[3]
          call.detail = line[4]
        }
        break
      }
      default:
        break
    }
  }
  return calls
}

/** When `worker` was killed, if it was. */
export const killTime = (faults: ReadonlyArray<WorkerFault>, worker: number): number | undefined =>
  faults.find((fault) => fault.worker === worker && fault.to === Infinity)?.from

/** Whether a pause or kill of the call's worker touched [call.begin, until). */
export const faultCovers = (faults: ReadonlyArray<WorkerFault>, call: Call, until: number): boolean =>
  faults.some((fault) => fault.worker === call.worker && fault.from < until && fault.to > call.begin)

/**
 * When the call's body was over at the latest: when it left, else when its worker was killed, else
 * `endedAt` (the run's end: the body was still inside).
 */
export const bodyEnd = (call: Call, faults: ReadonlyArray<WorkerFault>, endedAt: number): number =>
  call.left ?? killTime(faults, call.worker) ?? endedAt

/** When `call` waited for its key while its worker ran: [begin, entry or return), minus pauses, cut at a kill. */
export const waitingSpans = (
  call: Call,
  faults: ReadonlyArray<WorkerFault>,
  endedAt: number
): Array<readonly [number, number]> => {
  let spans: Array<readonly [number, number]> = [[call.begin, Math.min(call.entered ?? call.ended ?? endedAt, endedAt)]]
  for (const fault of faults) {
    if (fault.worker !== call.worker) continue
    spans = spans.flatMap(([from, to]): Array<readonly [number, number]> => {
      if (fault.to <= from || fault.from >= to) return [[from, to]]
      return [
        ...(fault.from > from ? [[from, fault.from] as const] : []),
        ...(fault.to < to ? [[fault.to, to] as const] : [])
      ]
    })
  }
  return spans.filter(([from, to]) => to > from)
}

const ms = (micros: number | undefined): string => (micros === undefined ? "?" : (micros / 1000).toFixed(1))

/** A call for reports: id, body interval (ms, monotonic), permits, token and how it ended. */
export const describeCall = (call: Call): string =>
  `${call.id} [${ms(call.entered)}, ${ms(call.left)}]${
    call.permits === undefined ? "" : ` ${call.permits.count}/${call.permits.limit} permits`
  } token ${call.token ?? "?"} ${call.outcome ?? "open"}${
    call.detail === undefined || call.detail === "" ? "" : ` ${call.detail}`
  }`
