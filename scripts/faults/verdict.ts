// What fails a cell, from the checker's counts, the final read of the servers and the scenario's
// expectations: one line per problem, empty when the cell passes.
import { describeCall } from "./calls.ts"
import { type Counts, describeExcess, describeOverlap } from "./checker.ts"
import { takeoverMillis, type TokenViolation } from "./history.ts"
import { describeObserverViolation } from "./observers.ts"
import type { Scenario } from "./scenario.ts"
import { describeRegistration, type Leftovers } from "./serverState.ts"

/** Beyond the lease, what a killed holder's key may take to pass on: the waiters' next poll and scheduling. */
export const takeoverSlackMillis = 1000

/**
 * How far the servers' clock may move against the monotonic one during a cell before the cell counts
 * as run under a clock step: drift over a cell is far below a millisecond, a step is seconds.
 */
export const clockStepToleranceMillis = 250

/** Whether a cell ran under a clock step: its servers' clock moved beyond the tolerance (`clockStepMillis`). */
export const steppedClock = (clockStepMillis: number | undefined): boolean =>
  clockStepMillis !== undefined && Math.abs(clockStepMillis) > clockStepToleranceMillis

export const describeTokenViolation = (violation: TokenViolation): string =>
  violation.kind === "order"
    ? `${violation.key}: ${describeCall(violation.earlier)} left before ${describeCall(violation.later)} entered, with a token not below it` +
      (violation.inGrantOrder === true
        ? ` (in grant order: the later call began at ${(violation.later.begin / 1000).toFixed(1)}, before the earlier body entered)`
        : "")
    : `${violation.key}: ${describeCall(violation.earlier)} and ${describeCall(violation.later)} share a token`

export interface VerdictInput {
  readonly scenario: Scenario
  readonly counts: Counts
  readonly leftovers: Leftovers | undefined
  readonly leaseMillis: number
  /** When the fault was injected and healed, for the problem lines (monotonic µs). */
  readonly faultStartedAt: number
  readonly healedAt: number
  /** How far the servers' clock moved against the monotonic one over the run (`clockStepMillis`). */
  readonly clockStepMillis?: number | undefined
}

export const problemsOf = (input: VerdictInput): Array<string> => {
  const { scenario, counts } = input
  const { history } = counts
  const problems: Array<string> = []
  // A clock stepped forward on the server ends leases early (Redis expires keys on its wall clock): the
  // lock's promise is then that the loss surfaces, as where the fault breaks the lock by design.
  const stepped = steppedClock(input.clockStepMillis)
  const exclusion = scenario.expect === "exclusion"
  const lost = counts.lockLost.acquire + counts.lockLost.renew + counts.lockLost.release
  const failingOverlaps = exclusion && !stepped ? counts.overlaps : counts.overlaps.filter((o) => !o.surfaced)
  const failingExcesses = exclusion && !stepped ? counts.overLimit : counts.overLimit.filter((e) => !e.surfaced)
  const tokenFailures = exclusion ? history.tokenViolations.filter((v) => v.inGrantOrder !== true) : []
  if (failingOverlaps.length > 0 || failingExcesses.length > 0 || tokenFailures.length > 0) {
    problems.push(
      `fault injected at ${(input.faultStartedAt / 1000).toFixed(1)}, healed at ${(input.healedAt / 1000).toFixed(1)} (ms, monotonic)`
    )
  }
  for (const overlap of failingOverlaps) {
    problems.push(
      `${exclusion && !stepped ? "overlap where exclusion is promised" : "silent overlap"}: ${describeOverlap(overlap)}`
    )
  }
  for (const excess of failingExcesses) {
    problems.push(
      `${exclusion && !stepped ? "over the limit where exclusion is promised" : "silently over the limit"}: ${describeExcess(excess)}`
    )
  }
  for (const violation of tokenFailures) problems.push(`token order: ${describeTokenViolation(violation)}`)
  if (scenario.lockLostRequired === true && lost === 0) {
    problems.push("no LockLost surfaced: the fault must take a held lock away in this scenario")
  }
  for (const hang of counts.hangs) problems.push(`hang: ${hang}`)
  for (const error of counts.unexpectedErrors) problems.push(`unexpected error: ${error}`)
  for (const call of history.endings.open) problems.push(`grant never ended (its worker lives): ${describeCall(call)}`)
  for (const takeover of history.takeovers) {
    if (!takeover.awaited) continue
    const millis = takeoverMillis(takeover)
    const killed = `${describeCall(takeover.holder)} killed at ${(takeover.killedAt / 1000).toFixed(1)}`
    const after = millis === undefined ? "no body entered after it" : `next body ${millis} ms later`
    const stuck = takeover.stuck
    if (stuck !== undefined) {
      // A semaphore's: the head of the line went without the dead permits after their leases ran out.
      const stuckMillis = Math.round((stuck.to - stuck.from) / 1000)
      if (stuckMillis > takeoverSlackMillis) {
        problems.push(
          `the permits of a killed holder were not back in use after its lease: the head of the line needed them for ` +
            `${stuckMillis} ms (${(stuck.from / 1000).toFixed(1)} to ${(stuck.to / 1000).toFixed(1)}; bound ${takeoverSlackMillis} ms): ${killed}, ${after}`
        )
      }
    } else if (millis === undefined || millis > input.leaseMillis + takeoverSlackMillis) {
      problems.push(
        `the key of a killed holder was not taken over within lease + ${takeoverSlackMillis} ms: ${killed}, ${after}`
      )
    }
  }
  const idle = history.longestIdle
  const idleBound = scenario.idleBoundMillis?.(input.leaseMillis)
  if (idleBound !== undefined && idle !== undefined) {
    const millis = Math.round((idle.to - idle.from) / 1000)
    if (millis > idleBound) {
      problems.push(
        `${idle.key} stood free for ${millis} ms while live calls waited (bound ${idleBound} ms), ` +
          `${(idle.from / 1000).toFixed(1)} to ${(idle.to / 1000).toFixed(1)}; waiting: ${idle.waiting.join(", ")}`
      )
    }
  }
  if (counts.acquisitionsAfterHeal === 0) {
    const how = Object.entries(counts.failedAfterHeal)
      .toSorted((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([outcome, n]) => `${n} x ${outcome}`)
    problems.push(
      `no acquisition after the fault ended${how.length === 0 ? "" : `; calls ended after it: ${how.join("; ")}`}`
    )
  }
  if (scenario.election === true) {
    // The observers' order is promised whatever the fault (election.md, Watching): it fails every cell.
    const observers = counts.observers
    if (observers === undefined || observers.leaders === 0) problems.push("the observers showed no leader at all")
    for (const violation of observers?.violations ?? []) {
      problems.push(`observer order: ${describeObserverViolation(violation)}`)
    }
    for (const failure of observers?.failures ?? []) problems.push(`observer failed: ${failure}`)
  }
  for (const key of input.leftovers?.keys ?? []) problems.push(`key left behind: ${key}`)
  for (const registration of input.leftovers?.registrations ?? []) {
    problems.push(`stranded registration: ${describeRegistration(registration)}`)
  }
  for (const failure of input.leftovers?.unreadable ?? []) problems.push(`cannot read what is left: ${failure}`)
  return problems
}
