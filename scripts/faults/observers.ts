// The checker's rule for the observers of an election cell, from the workers' lines alone like the
// rest of the checker: what each worker's observer of each election showed (its O lines, in the order
// it wrote them) against what docs/election.md (Watching) promises of `Election.observe`, and against
// the grants the workers reported (their G and E lines):
// - states never go back: no term shown after a higher one, no revision of a term after a higher
//   revision of it;
// - a term that ended never comes back: once "nobody leads" followed term T, T is not shown again;
// - no state twice in a row: the same term and revision, or "nobody leads" after "nobody leads";
// - no invented term: every term shown is the term of a grant some worker reported on that election,
//   shown with the candidate id its call campaigned with (`w<worker>-f<fiber>`). Two exceptions,
//   both counted as unreported: a worker killed while one of its calls campaigned for that election
//   (begun, nothing after) may have won and proclaimed before it could write the term; and a
//   campaign whose lock was lost while its first proclamation was written (the write reached the
//   server, its reply did not) gives that lock back and campaigns on, so its call reports a later
//   term or none. A term shown with that call's candidate id is then its grant, when (the servers'
//   clock offset known) the term, the server's time at the grant, falls between the call's start and
//   the kill, or between its start and the term it reported (its end when it reported none).
// The observers' order is promised even where exclusion is not (a restart that forgets the leader,
// a paused leader), so a violation fails the cell whatever its expectation (verdict.ts).
import { type Call, killTime, type WorkerFault } from "./calls.ts"
import type { ClockOffset } from "./history.ts"
import type { WorkerLine } from "./protocol.ts"

/** One state an observer showed: a leader (`term` and the rest defined) or nobody (`term` undefined). */
export interface ObservedState {
  readonly worker: number
  readonly key: string
  /** When the observer wrote it (monotonic µs). */
  readonly at: number
  readonly term: number | undefined
  readonly revision: number | undefined
  readonly candidate: string | undefined
}

export type ObserverViolationKind = "back" | "ended" | "repeated" | "unknown" | "candidate"

export interface ObserverViolation {
  readonly kind: ObserverViolationKind
  readonly state: ObservedState
  /** The observer's state before it (back, ended, repeated). */
  readonly previous?: ObservedState | undefined
  /** The grant of the term (candidate). */
  readonly grant?: Call | undefined
}

export interface Observers {
  /** States checked, over every observer. */
  readonly states: number
  /** Of which showed a leader. */
  readonly leaders: number
  /** Distinct terms shown (by any observer, on any election). */
  readonly termsShown: number
  /**
   * Of which won by a call of a killed worker that was still campaigning at the kill, or by a campaign
   * that gave its lock back: shown, never written by the worker (see above).
   */
  readonly unreported: number
  /** Observers (worker x election) that showed anything. */
  readonly streams: number
  readonly violations: ReadonlyArray<ObserverViolation>
  /** Observer streams that failed (their OX lines): `observe` reads temporary failures through. */
  readonly failures: ReadonlyArray<string>
}

/** The candidate id an election call campaigned with: `w<worker>-f<fiber>` from its id `<worker>.<fiber>.<n>`. */
export const candidateOf = (call: Call): string => {
  const [worker, fiber] = call.id.split(".")
  return `w${worker}-f${fiber}`
}

/** Every term a worker reported holding, per election key: from its G line, and its body's token. */
const grantsByKey = (calls: Iterable<Call>): Map<string, Map<number, Call>> => {
  const keys = new Map<string, Map<number, Call>>()
  for (const call of calls) {
    for (const term of [call.term, call.token]) {
      if (term === undefined) continue
      const terms = keys.get(call.key) ?? new Map<number, Call>()
      if (!terms.has(term)) terms.set(term, call)
      keys.set(call.key, terms)
    }
  }
  return keys
}

/** Reading a term against the server clock: TIME's whole microseconds and the calibration's rounding. */
const clockToleranceMicros = 1000

/**
 * The call of a killed worker that may have won `term` on `key` as `candidate` without writing it:
 * that candidate's call on `key`, begun before the kill and with nothing after its B line, whose
 * start and kill bound the term on the server's clock (when the offset is known).
 */
const unreportedGrant = (
  calls: ReadonlyArray<Call>,
  key: string,
  term: number,
  candidate: string | undefined,
  faults: ReadonlyArray<WorkerFault>,
  offset: ClockOffset | undefined
): Call | undefined =>
  calls.find((call) => {
    const killedAt = killTime(faults, call.worker)
    if (killedAt === undefined || call.key !== key || candidateOf(call) !== candidate) return false
    if (call.begin > killedAt || call.term !== undefined || call.entered !== undefined || call.ended !== undefined) {
      return false
    }
    return (
      offset === undefined ||
      (term >= call.begin + offset.low - clockToleranceMicros && term <= killedAt + offset.high + clockToleranceMicros)
    )
  })

/**
 * The call that won `term` on `key` as `candidate`, proclaimed it, and gave it back because the lock
 * was lost before the proclamation's reply came: that candidate's call on `key`, ended, with a later
 * term than `term` or none, whose start and (later) term or end bound `term` on the server's clock.
 */
const abandonedWin = (
  calls: ReadonlyArray<Call>,
  key: string,
  term: number,
  candidate: string | undefined,
  offset: ClockOffset | undefined
): Call | undefined =>
  calls.find((call) => {
    if (call.key !== key || candidateOf(call) !== candidate || call.ended === undefined) return false
    if (call.term !== undefined && call.term <= term) return false
    if (offset === undefined) return true
    const upper = call.term ?? call.ended + offset.high + clockToleranceMicros
    return term >= call.begin + offset.low - clockToleranceMicros && term < upper
  })

/**
 * Checks every observer's states (see above); undefined when no worker observed anything. `faults`
 * (killed workers) and `offset` (the servers' clock) place the terms a killed worker won unreported.
 */
export const checkObservers = (
  lines: ReadonlyArray<{ readonly worker: number; readonly line: WorkerLine }>,
  calls: Iterable<Call>,
  faults: ReadonlyArray<WorkerFault> = [],
  offset?: ClockOffset | undefined
): Observers | undefined => {
  const streams = new Map<string, Array<ObservedState>>()
  const failures: Array<string> = []
  for (const { worker, line } of lines) {
    if (line[0] === "OX") failures.push(`worker ${worker}'s observer of ${line[1]} failed: ${line[3]}`)
    if (line[0] !== "O") continue
    const [, key, at, term, revision, candidate] = line
    const stream = `${worker} ${key}`
    const states = streams.get(stream) ?? []
    states.push({
      worker,
      key,
      at,
      term: term ?? undefined,
      revision: revision ?? undefined,
      candidate: candidate ?? undefined
    })
    streams.set(stream, states)
  }
  if (streams.size === 0 && failures.length === 0) return undefined
  const all = [...calls]
  const grants = grantsByKey(all)
  const violations: Array<ObserverViolation> = []
  const shown = new Set<string>()
  const unreported = new Set<string>()
  let states = 0
  let leaders = 0
  for (const list of streams.values()) {
    // The highest term shown, its latest revision, and whether "nobody leads" came after it.
    let highest: ObservedState | undefined
    let vacant = false
    let previous: ObservedState | undefined
    for (const state of list) {
      states++
      if (state.term === undefined) {
        if (previous !== undefined && previous.term === undefined) {
          violations.push({ kind: "repeated", state, previous })
        }
        if (highest !== undefined) vacant = true
        previous = state
        continue
      }
      leaders++
      shown.add(`${state.key} ${state.term}`)
      const grant = grants.get(state.key)?.get(state.term)
      if (grant === undefined) {
        if (
          unreportedGrant(all, state.key, state.term, state.candidate, faults, offset) !== undefined ||
          abandonedWin(all, state.key, state.term, state.candidate, offset) !== undefined
        ) {
          unreported.add(`${state.key} ${state.term}`)
        } else {
          violations.push({ kind: "unknown", state })
        }
      } else if (state.candidate !== candidateOf(grant)) violations.push({ kind: "candidate", state, grant })
      const top = highest?.term ?? -Infinity
      const revision = state.revision ?? 0
      const topRevision = highest?.revision ?? 0
      if (highest !== undefined && state.term < top) {
        violations.push({ kind: "back", state, previous: highest })
      } else if (highest !== undefined && state.term === top && vacant) {
        violations.push({ kind: "ended", state, previous })
      } else if (highest !== undefined && state.term === top && revision === topRevision) {
        violations.push({ kind: "repeated", state, previous: highest })
      } else if (highest !== undefined && state.term === top && revision < topRevision) {
        violations.push({ kind: "back", state, previous: highest })
      } else {
        highest = state
        vacant = false
      }
      previous = state
    }
  }
  return {
    states,
    leaders,
    termsShown: shown.size,
    unreported: unreported.size,
    streams: streams.size,
    violations,
    failures
  }
}

const describeState = (state: ObservedState | undefined): string =>
  state === undefined
    ? "?"
    : state.term === undefined
      ? `nobody at ${(state.at / 1000).toFixed(1)}`
      : `term ${state.term} rev ${state.revision ?? "?"} (${state.candidate ?? "?"}) at ${(state.at / 1000).toFixed(1)}`

/** Pretty form of an observer violation for reports. */
export const describeObserverViolation = (violation: ObserverViolation): string => {
  const { state, previous } = violation
  const who = `worker ${state.worker}'s observer of ${state.key}`
  switch (violation.kind) {
    case "back":
      return `${who} went back: ${describeState(state)} after ${describeState(previous)}`
    case "ended":
      return `${who} showed an ended term again: ${describeState(state)} after ${describeState(previous)}`
    case "repeated":
      return `${who} showed one state twice in a row: ${describeState(state)} after ${describeState(previous)}`
    case "unknown":
      return `${who} showed a term no worker was granted: ${describeState(state)}`
    case "candidate":
      return `${who} showed ${describeState(state)}, but that term was granted to ${violation.grant?.id ?? "?"} (${
        violation.grant === undefined ? "?" : candidateOf(violation.grant)
      })`
  }
}
