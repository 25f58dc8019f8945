// The grant history of each key, checked from the bodies the workers reported (monotonic intervals and
// fencing tokens) and the parent's record of paused and killed workers; like checker.ts it knows
// nothing of the lock's internals, only what the docs promise:
// - fencing tokens grow in grant order: a body that left before another entered holds a smaller
//   token (on a semaphore key, unless grant order explains the inversion: permits.ts), and no two
//   grants of a key share one (docs/fencing.md);
// - every grant ends: released, lost (`LockLost`), failed otherwise, or left to expire by a killed
//   worker, whose key the others then take within about a lease (a semaphore's permits: permits.ts);
// - a free key does not keep live waiters waiting: the longest such stretch is measured per key.
import { bodyEnd, type Call, killTime, type WorkerFault, waitingSpans } from "./calls.ts"
import { grantOrderWitness, reclaimOf } from "./permits.ts"

export interface TokenViolation {
  readonly key: string
  /** "order": `earlier` left before `later` entered, yet its token is not smaller; "duplicate": one token, two grants. */
  readonly kind: "order" | "duplicate"
  readonly earlier: Call
  readonly later: Call
  /**
   * On a semaphore key, an "order" violation that grant order explains: `later`'s call began before
   * the body of every such `earlier` entered, so its grant may have come first and reached its body
   * late while a later grant's body ran in full on another permit (permits.ts). Counted, not failed.
   */
  readonly inGrantOrder?: boolean | undefined
}

/** How the grants (calls whose body entered) ended. */
export interface Endings {
  /** The call returned without error: the lock released it. */
  released: number
  /** The call failed with `LockLost`. */
  lost: number
  /** The call failed with another error after its body ran (its key is left to the lease). */
  failed: number
  /** The worker was killed with the body inside: the grant expires with its lease. */
  killed: number
  /** Never ended: the body entered and the call never returned, though its worker was not killed. */
  readonly open: Array<Call>
}

/** A holder killed inside its body, and the next body on its key. */
export interface Takeover {
  readonly key: string
  readonly holder: Call
  readonly killedAt: number
  /**
   * The first body entered on the key after the kill (undefined: none); on a semaphore key, the first
   * that needed the dead holders' permits (permits.ts).
   */
  readonly next: Call | undefined
  /** Whether a live call waited for the key after the kill, i.e. whether a takeover was due. */
  readonly awaited: boolean
  /**
   * On a semaphore key: the longest stretch after the dead leases ran out in which the head of the
   * line needed the dead permits and did not get them (permits.ts); undefined when it never did.
   */
  readonly stuck?: { readonly from: number; readonly to: number } | undefined
}

/** A stretch in which a key had no body inside while live calls (of running workers) waited for it. */
export interface Idle {
  readonly key: string
  readonly from: number
  readonly to: number
  /** Some of the calls that waited through it. */
  readonly waiting: ReadonlyArray<string>
}

/** The server's clock against the shared monotonic one: server microseconds - monotonic microseconds, bounds. */
export interface ClockOffset {
  readonly low: number
  readonly high: number
}

export interface History {
  /** Grants whose token was checked against every grant of their key that ended before them. */
  readonly grants: number
  readonly tokenViolations: ReadonlyArray<TokenViolation>
  /**
   * Grants whose token is above the server's clock at their body's entry (by `clockToleranceMicros`):
   * the counter ran ahead of the time floor. Undefined without a clock offset.
   */
  readonly tokensAhead: number | undefined
  readonly endings: Endings
  readonly takeovers: ReadonlyArray<Takeover>
  /** The longest idle stretch of any key, over the whole run. */
  readonly longestIdle: Idle | undefined
}

export interface HistoryInput {
  readonly calls: Iterable<Call>
  readonly workerFaults: ReadonlyArray<WorkerFault>
  /** When the parent stopped waiting for the workers: open bodies and waits are cut there. */
  readonly endedAt: number
  /** The lease of every worker: how long a killed holder's key may stay held. */
  readonly leaseMillis: number
  readonly clockOffset: ClockOffset | undefined
}

/** Reading a token against the server clock: TIME's whole microseconds and the calibration's own rounding. */
const clockToleranceMicros = 1000

const byKey = (calls: Iterable<Call>): Map<string, Array<Call>> => {
  const keys = new Map<string, Array<Call>>()
  for (const call of calls) {
    const list = keys.get(call.key) ?? []
    list.push(call)
    keys.set(call.key, list)
  }
  return keys
}

/** Token order of one key's grants: after sorting by end and by entry, one sweep keeps the largest token so far. */
const tokenViolationsOf = (
  key: string,
  grants: ReadonlyArray<Call>,
  faults: ReadonlyArray<WorkerFault>
): Array<TokenViolation> => {
  const violations: Array<TokenViolation> = []
  const flagged = new Set<string>()
  // A body that never left and whose worker lives was still inside at the end: it precedes nobody.
  const over = (call: Call): number | undefined => call.left ?? killTime(faults, call.worker)
  const ended = grants.filter((call) => over(call) !== undefined).toSorted((a, b) => (over(a) ?? 0) - (over(b) ?? 0))
  const entered = grants.toSorted((a, b) => (a.entered ?? 0) - (b.entered ?? 0))
  let i = 0
  let largest: Call | undefined
  for (const later of entered) {
    for (; i < ended.length; i++) {
      const candidate = ended[i]
      if (candidate === undefined || (over(candidate) ?? 0) >= (later.entered ?? 0)) break
      if (largest === undefined || (candidate.token ?? 0) > (largest.token ?? 0)) largest = candidate
    }
    if (largest !== undefined && (largest.token ?? 0) >= (later.token ?? 0)) {
      if (later.permits === undefined) {
        violations.push({ key, kind: "order", earlier: largest, later })
      } else {
        const witness = grantOrderWitness(ended.slice(0, i), later)
        violations.push(
          witness === undefined
            ? { key, kind: "order", earlier: largest, later, inGrantOrder: true }
            : { key, kind: "order", earlier: witness, later }
        )
      }
      flagged.add(later.id)
    }
  }
  const holders = new Map<number, Call>()
  for (const call of entered) {
    const token = call.token ?? 0
    const first = holders.get(token)
    if (first === undefined) holders.set(token, call)
    else if (!flagged.has(call.id)) violations.push({ key, kind: "duplicate", earlier: first, later: call })
  }
  return violations
}

const endingsOf = (grants: ReadonlyArray<Call>, faults: ReadonlyArray<WorkerFault>): Endings => {
  const endings: Endings = { released: 0, lost: 0, failed: 0, killed: 0, open: [] }
  for (const call of grants) {
    if (call.outcome === "ok") endings.released++
    else if (call.outcome === "LockLost") endings.lost++
    else if (call.outcome !== undefined) endings.failed++
    else if (killTime(faults, call.worker) !== undefined) endings.killed++
    else endings.open.push(call)
  }
  return endings
}

/**
 * The calls of killed workers that may hold a lock key nobody is seen holding: a call still waiting
 * when its worker was killed, on a key with no body inside then. Its grant may have come just before
 * the kill (a release's hand-off it claimed, or a free key it took) with its body not yet entered, and
 * the key then stays held, unseen, until that lease runs out, as a killed holder's does. While
 * another body is inside, the key is that body's, and the dead call can hold nothing: a dead waiter
 * must then be passed over, which the idle check still sees.
 */
const unseenHoldersOf = (
  calls: ReadonlyArray<Call>,
  bodies: ReadonlyArray<readonly [number, number]>,
  input: HistoryInput
): Array<{ readonly call: Call; readonly killedAt: number }> =>
  calls.flatMap((call) => {
    if (call.entered !== undefined || call.ended !== undefined || call.permits !== undefined) return []
    const killedAt = killTime(input.workerFaults, call.worker)
    if (killedAt === undefined || call.begin > killedAt) return []
    const held = bodies.some(([from, to]) => from <= killedAt && killedAt < to)
    return held ? [] : [{ call, killedAt }]
  })

/**
 * The longest idle stretch of one key: a sweep over body intervals (a killed holder's counted until
 * its lease could have run out, since its key stays held until then, and so is an unseen holder's:
 * `unseenHoldersOf`) and waiting spans.
 */
const longestIdleOf = (key: string, calls: ReadonlyArray<Call>, input: HistoryInput): Idle | undefined => {
  const leaseMicros = input.leaseMillis * 1000
  const events: Array<{
    readonly t: number
    readonly occupied: number
    readonly waiting: number
    readonly id: string
  }> = []
  const bodies: Array<readonly [number, number]> = []
  for (const call of calls) {
    if (call.entered !== undefined) {
      const killed = call.left === undefined ? killTime(input.workerFaults, call.worker) : undefined
      const end = killed === undefined ? bodyEnd(call, input.workerFaults, input.endedAt) : killed + leaseMicros
      bodies.push([call.entered, Math.max(end, call.entered)])
      events.push({ t: call.entered, occupied: 1, waiting: 0, id: call.id })
      events.push({ t: Math.max(end, call.entered), occupied: -1, waiting: 0, id: call.id })
    }
    for (const [from, to] of waitingSpans(call, input.workerFaults, input.endedAt)) {
      events.push({ t: from, occupied: 0, waiting: 1, id: call.id })
      events.push({ t: to, occupied: 0, waiting: -1, id: call.id })
    }
  }
  for (const { call, killedAt } of unseenHoldersOf(calls, bodies, input)) {
    events.push({ t: killedAt, occupied: 1, waiting: 0, id: call.id })
    events.push({ t: killedAt + leaseMicros, occupied: -1, waiting: 0, id: call.id })
  }
  // At equal times bodies enter before they leave and waits end before they begin: a hand-off in
  // the same microsecond is no idle time.
  events.sort((a, b) => a.t - b.t || b.occupied - a.occupied || a.waiting - b.waiting)
  let occupied = 0
  const waiting = new Set<string>()
  let idleSince: number | undefined
  let idleWaiters = new Set<string>()
  let longest: Idle | undefined
  for (const event of events) {
    occupied += event.occupied
    if (event.waiting === 1) waiting.add(event.id)
    if (event.waiting === -1) waiting.delete(event.id)
    const idle = occupied === 0 && waiting.size > 0
    if (idle && idleSince === undefined) {
      idleSince = event.t
      idleWaiters = new Set([...waiting].slice(0, 4))
    } else if (idle) {
      for (const id of waiting) if (idleWaiters.size < 4) idleWaiters.add(id)
    } else if (idleSince !== undefined) {
      if (longest === undefined || event.t - idleSince > longest.to - longest.from) {
        longest = { key, from: idleSince, to: event.t, waiting: [...idleWaiters] }
      }
      idleSince = undefined
    }
  }
  return longest
}

const takeoversOf = (key: string, calls: ReadonlyArray<Call>, input: HistoryInput): Array<Takeover> => {
  const takeovers: Array<Takeover> = []
  const entered = calls
    .filter((call) => call.entered !== undefined)
    .toSorted((a, b) => (a.entered ?? 0) - (b.entered ?? 0))
  for (const holder of entered) {
    const killedAt = holder.left === undefined ? killTime(input.workerFaults, holder.worker) : undefined
    if (killedAt === undefined) continue
    if (holder.permits !== undefined) {
      const { next, stuck } = reclaimOf(calls, killedAt, input.leaseMillis, input.workerFaults, input.endedAt)
      takeovers.push({ key, holder, killedAt, next, awaited: stuck !== undefined, stuck })
      continue
    }
    const next = entered.find((call) => (call.entered ?? 0) > killedAt)
    // The key is free by the end of the lease the holder last renewed, at most a lease after the kill.
    // A takeover is owed only to a call still waiting then: one that gave up earlier (its wait
    // budget ran out while the dead lease ran) was never owed the key, and a free key with a live
    // waiter is the idle check's business.
    const freeBy = killedAt + input.leaseMillis * 1000
    const awaited = calls.some((call) =>
      waitingSpans(call, input.workerFaults, input.endedAt).some(([from, to]) => to > freeBy && from < input.endedAt)
    )
    takeovers.push({ key, holder, killedAt, next, awaited })
  }
  return takeovers
}

/** Checks every key's grants. */
export const checkHistory = (input: HistoryInput): History => {
  const tokenViolations: Array<TokenViolation> = []
  const takeovers: Array<Takeover> = []
  const allGrants: Array<Call> = []
  let longestIdle: Idle | undefined
  let tokensAhead = 0
  for (const [key, calls] of byKey(input.calls)) {
    const grants = calls.filter((call) => call.entered !== undefined && call.token !== undefined)
    allGrants.push(...grants)
    tokenViolations.push(...tokenViolationsOf(key, grants, input.workerFaults))
    takeovers.push(...takeoversOf(key, calls, input))
    const idle = longestIdleOf(key, calls, input)
    if (idle !== undefined && (longestIdle === undefined || idle.to - idle.from > longestIdle.to - longestIdle.from)) {
      longestIdle = idle
    }
    const offset = input.clockOffset
    if (offset !== undefined) {
      // The grant was issued before its body entered, so the server's clock then was at most
      // entry + high; a token above that did not come from the clock.
      tokensAhead += grants.filter(
        (call) => (call.token ?? 0) > (call.entered ?? 0) + offset.high + clockToleranceMicros
      ).length
    }
  }
  return {
    grants: allGrants.length,
    tokenViolations,
    tokensAhead: input.clockOffset === undefined ? undefined : tokensAhead,
    endings: endingsOf(allGrants, input.workerFaults),
    takeovers,
    longestIdle
  }
}

/** Milliseconds from a kill to the next body on the key, if one entered. */
export const takeoverMillis = (takeover: Takeover): number | undefined =>
  takeover.next?.entered === undefined ? undefined : Math.round((takeover.next.entered - takeover.killedAt) / 1000)

/** The longest idle stretch in ms, if any. */
export const idleMillis = (counts: { readonly history: History } | undefined): number | undefined => {
  const idle = counts?.history.longestIdle
  return idle === undefined ? undefined : Math.round((idle.to - idle.from) / 1000)
}
