// The independent checker: from the workers' lines alone (and the parent's record of which worker it
// paused or killed when), it counts what happened, finds every pair of lock bodies on the same key
// whose intervals overlap on the shared monotonic clock (on a semaphore key, every stretch in which
// the bodies held more permits than the limit: permits.ts), and checks each key's grant history
// (history.ts: token order, how every grant ended, idle keys); in an election cell it also checks what
// the observers showed (observers.ts). It knows nothing of the lock's internals.
import { assembleCalls, bodyEnd, type Call, describeCall, faultCovers, killTime, type WorkerFault } from "./calls.ts"
import { checkHistory, type ClockOffset, type History } from "./history.ts"
import { checkObservers, type Observers } from "./observers.ts"
import { type Excess, permitsHeld } from "./permits.ts"
import type { WorkerLine } from "./protocol.ts"

export type { Call, Excess, Observers, WorkerFault }

export interface CheckInput {
  readonly lines: ReadonlyArray<{ readonly worker: number; readonly line: WorkerLine }>
  readonly waitTimeoutMillis: number
  /** Paused (SIGSTOP..SIGCONT) or killed (from = to = kill time, to = Infinity) workers. */
  readonly workerFaults: ReadonlyArray<WorkerFault>
  /** When the fault ended (healed); progress is counted after it. */
  readonly healedAt: number
  /** When the parent asked the workers to stop; calls still open then are judged at `endedAt`. */
  readonly endedAt: number
  /** LockRedisError codes the scenario expects (e.g. OOM); others are unexpected. */
  readonly expectedErrorCodes: ReadonlyArray<string>
  /** The workers' lease: how long a killed holder's key may stay held. */
  readonly leaseMillis: number
  /** The servers' clock against the monotonic one, when it could be measured. */
  readonly clockOffset: ClockOffset | undefined
  /**
   * An election cell: after its body a leader confirms the lead at the server, releases the lock and
   * tells observers (`announce`), each bounded on its own, so a call may return that much later.
   */
  readonly election?: boolean | undefined
}

export interface Overlap {
  readonly key: string
  readonly first: Call
  readonly second: Call
  /** The earlier holder learned of it: its call ended with LockLost. */
  readonly surfaced: boolean
}

export interface Counts {
  calls: number
  acquisitions: number
  acquisitionsAfterHeal: number
  timedOut: number
  lockLost: { acquire: number; renew: number; release: number }
  expectedErrors: number
  unexpectedErrors: Array<string>
  /** Pairs of lock bodies on one key that were inside together. */
  overlaps: Array<Overlap>
  /** Stretches in which the bodies on one semaphore key held more permits than its limit. */
  overLimit: Array<Excess>
  /** The most permits held at once on one semaphore key (0 without semaphores). */
  peakPermits: number
  hangs: Array<string>
  /** The longest time (ms) in which no body entered, on any key: shows how hard the fault hit. */
  longestGapMillis: number
  /** The longest wait of a call (ms), to its body or to its failure. */
  longestWaitMillis: number
  /**
   * How the calls that ended after the fault healed without entering their body ended (outcome and
   * detail, with how many): what to read when nothing was acquired after the fault.
   */
  failedAfterHeal: Record<string, number>
  /** Each key's grants in order: fencing tokens, how grants ended, takeovers after kills, idle keys. */
  history: History
  /** In an election cell: what the observers showed, checked (undefined when nothing was observed). */
  observers: Observers | undefined
}

/** What the docs allow past `waitTimeout`: the bounded release of an attempt that may have succeeded. */
const hangSlackMicros = 1_000_000
/** Scheduling tolerance on a shared 2-core machine (timers, event-loop turns): a hang is far longer. */
const toleranceMicros = 250_000
/**
 * What a leader's call may take after its body on a server that does not answer: the confirmation
 * (one check, at most a second), the release (a second) and the announcement (at most 2 s, a quarter
 * of the usable lease).
 */
const electionAfterBodyMicros = 2 * hangSlackMicros + 2_000_000

/** Assembles the calls from the lines and counts. */
export const check = (input: CheckInput): Counts => {
  const calls = assembleCalls(input.lines)
  const held = permitsHeld(calls.values(), input.workerFaults, input.endedAt)
  const counts: Counts = {
    calls: calls.size,
    acquisitions: 0,
    acquisitionsAfterHeal: 0,
    timedOut: 0,
    lockLost: { acquire: 0, renew: 0, release: 0 },
    expectedErrors: 0,
    unexpectedErrors: [],
    overlaps: [],
    overLimit: held.excesses,
    peakPermits: held.peak,
    hangs: [],
    longestGapMillis: 0,
    longestWaitMillis: 0,
    failedAfterHeal: {},
    history: checkHistory({
      calls: calls.values(),
      workerFaults: input.workerFaults,
      endedAt: input.endedAt,
      leaseMillis: input.leaseMillis,
      clockOffset: input.clockOffset
    }),
    observers: checkObservers(input.lines, calls.values(), input.workerFaults, input.clockOffset)
  }
  const killedAt = (call: Call): number | undefined => killTime(input.workerFaults, call.worker)
  const waitLimit = input.waitTimeoutMillis * 1000 + hangSlackMicros + toleranceMicros

  for (const call of calls.values()) {
    if (call.entered !== undefined) {
      counts.acquisitions++
      if (call.entered >= input.healedAt) counts.acquisitionsAfterHeal++
    } else if (call.ended !== undefined && call.ended >= input.healedAt && call.outcome !== undefined) {
      const how = `${call.outcome} ${call.detail ?? ""}`.trim()
      counts.failedAfterHeal[how] = (counts.failedAfterHeal[how] ?? 0) + 1
    }
    switch (call.outcome) {
      case "TimedOut":
        counts.timedOut++
        break
      case "LockLost": {
        const phase = (call.detail ?? "").split("/")[0]
        if (phase === "acquire" || phase === "renew" || phase === "release") counts.lockLost[phase]++
        break
      }
      case "LockRedisError":
        if (input.expectedErrorCodes.includes((call.detail ?? "").split(":")[0] ?? "")) counts.expectedErrors++
        else counts.unexpectedErrors.push(`${call.id} LockRedisError ${call.detail}`)
        break
      case "InvalidArgument":
      case "defect":
        counts.unexpectedErrors.push(`${call.id} ${call.outcome} ${call.detail}`)
        break
      default:
        break
    }
    // Hangs: waiting past waitTimeout + 1 s, or a release (body left to call returned) past 1 s + 1 s
    // (a leader's: past its confirmation, release and announcement, 4 s).
    // Time a worker spent stopped by the parent is its own, not the lock's: such calls are skipped.
    const killed = killedAt(call)
    const waitEnd = call.entered ?? call.ended ?? killed ?? input.endedAt
    if (!faultCovers(input.workerFaults, call, waitEnd)) {
      counts.longestWaitMillis = Math.max(counts.longestWaitMillis, Math.round((waitEnd - call.begin) / 1000))
    }
    if (!faultCovers(input.workerFaults, call, waitEnd) && waitEnd - call.begin > waitLimit) {
      counts.hangs.push(
        `${call.id} waited ${Math.round((waitEnd - call.begin) / 1000)} ms (${call.outcome ?? "still open"} ${
          call.detail ?? ""
        }${call.entered === undefined ? "" : ", then entered its body"})`
      )
    }
    if (call.left !== undefined && killed === undefined) {
      const end = call.ended ?? input.endedAt
      const afterBody = input.election === true ? electionAfterBodyMicros : 2 * hangSlackMicros
      if (!faultCovers(input.workerFaults, call, end) && end - call.left > afterBody + toleranceMicros) {
        counts.hangs.push(`${call.id} returned ${Math.round((end - call.left) / 1000)} ms after its body`)
      }
    }
  }

  // Overlaps: per lock key, bodies sorted by entry; each is compared with every earlier body still inside.
  const byKey = new Map<string, Array<Call>>()
  for (const call of calls.values()) {
    if (call.entered === undefined || call.permits !== undefined) continue
    const list = byKey.get(call.key) ?? []
    list.push(call)
    byKey.set(call.key, list)
  }
  for (const [key, list] of byKey) {
    list.sort((a, b) => (a.entered ?? 0) - (b.entered ?? 0))
    const open: Array<Call> = []
    for (const call of list) {
      const entered = call.entered ?? 0
      for (const earlier of open) {
        const leftAt = bodyEnd(earlier, input.workerFaults, input.endedAt)
        if (leftAt > entered) {
          counts.overlaps.push({ key, first: earlier, second: call, surfaced: earlier.outcome === "LockLost" })
        }
      }
      open.push(call)
      // Keep only bodies that may still be inside at later entries.
      for (let i = open.length - 1; i >= 0; i--) {
        const other = open[i]
        if (other === undefined) continue
        const leftAt = bodyEnd(other, input.workerFaults, input.endedAt)
        if (leftAt <= entered) open.splice(i, 1)
      }
    }
  }
  const entries = [...calls.values()]
    .map((call) => call.entered)
    .filter((t): t is number => t !== undefined)
    .toSorted((a, b) => a - b)
  for (let i = 1; i < entries.length; i++) {
    const gap = ((entries[i] ?? 0) - (entries[i - 1] ?? 0)) / 1000
    if (gap > counts.longestGapMillis) counts.longestGapMillis = Math.round(gap)
  }
  return counts
}

/** Pretty form of an overlap for reports. */
export const describeOverlap = (overlap: Overlap): string =>
  `${overlap.key}: ${describeCall(overlap.first)} vs ${describeCall(overlap.second)} (${
    overlap.surfaced ? "surfaced as LockLost" : "SILENT"
  })`

const ms = (micros: number): string => (micros / 1000).toFixed(1)

/** Pretty form of an excess for reports. */
export const describeExcess = (excess: Excess): string =>
  `${excess.key}: ${excess.held} permits of ${excess.limit} held from ${ms(excess.from)} to ${ms(excess.to)} by ` +
  `${excess.holders.map(describeCall).join(", ")} (${excess.surfaced ? "surfaced as LockLost" : "SILENT"})`
