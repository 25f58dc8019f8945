// What the election demo checks after its run, and the summary it prints: the observer's states only
// move forward (terms rise, a term never comes back, no state is shown twice); the writes the fence
// accepted rise in term and no two terms' accepted writes overlap in time (never two leaders at
// work); and each change of leader was seen within its bound.
import * as Option from "effect/Option"
import type { Election } from "@sage/lock"
import type { Heard } from "./candidates.ts"
import type { Sighting } from "./observer.ts"
import type { Measurements } from "./script.ts"

export interface Bounds {
  readonly leaseMillis: number
  readonly observeMillis: number
  /** How much later than the bound a change may be seen: `DEMO_BOUNDS_SLACK_MS`, for loaded machines. */
  readonly slackMillis: number
  /** How soon a resign is seen to hand over, at the median. */
  readonly resignMillis: number
}

export interface Verdict {
  readonly problems: ReadonlyArray<string>
  readonly lines: ReadonlyArray<string>
}

/** Terms rise, a term shown once never comes back (after a later term or after "nobody leads"), nothing repeats. */
export const observerProblems = (seen: ReadonlyArray<Sighting>, time: (at: number) => string): Array<string> => {
  const problems: Array<string> = []
  let last: Election.Leader | undefined
  let highest = 0
  let vacant = false
  for (const { at, state } of seen) {
    const when = `at ${time(at)}`
    if (Option.isNone(state)) {
      if (vacant) problems.push(`the observer was shown "nobody leads" twice in a row ${when}`)
      vacant = true
      continue
    }
    const leader = state.value
    if (last !== undefined) {
      if (leader.term < highest) {
        problems.push(`the observer's term went back ${when}: ${leader.term} after ${highest}`)
      } else if (leader.term === last.term && vacant) {
        problems.push(`term ${leader.term} was shown again after "nobody leads" ${when}`)
      } else if (leader.term === last.term && leader.revision <= last.revision) {
        problems.push(`term ${leader.term} (revision ${leader.revision}) was shown twice ${when}`)
      }
    }
    last = leader
    highest = Math.max(highest, leader.term)
    vacant = false
  }
  return problems
}

interface Span {
  readonly term: number
  readonly candidates: Set<string>
  first: number
  last: number
  writes: number
}

/** Accepted writes rise in term, and no two terms' spans of accepted writes overlap. */
export const writeProblems = (log: ReadonlyArray<Heard>, time: (at: number) => string): Array<string> => {
  const problems: Array<string> = []
  const accepted = log
    .flatMap(({ candidate, event }) => (event.t === "work" && event.ok ? [{ candidate, ...event }] : []))
    .toSorted((a, b) => a.at - b.at)
  const spans = new Map<number, Span>()
  for (const [i, write] of accepted.entries()) {
    const before = accepted[i - 1]
    if (before !== undefined && write.term < before.term) {
      problems.push(
        `an accepted write of term ${write.term} (${write.candidate}) at ${time(write.at)} ` +
          `came after one of term ${before.term} (${before.candidate})`
      )
    }
    const span = spans.get(write.term)
    if (span === undefined) {
      spans.set(write.term, {
        term: write.term,
        candidates: new Set([write.candidate]),
        first: write.at,
        last: write.at,
        writes: 1
      })
    } else {
      span.candidates.add(write.candidate)
      span.last = write.at
      span.writes++
    }
  }
  const ordered = [...spans.values()].toSorted((a, b) => a.first - b.first)
  for (const span of ordered) {
    if (span.candidates.size > 1) problems.push(`term ${span.term} wrote from ${[...span.candidates].join(" and ")}`)
  }
  for (const [i, a] of ordered.entries()) {
    for (const b of ordered.slice(i + 1)) {
      if (a.first <= b.last && b.first <= a.last) {
        problems.push(
          `two leaders did accepted work at once: term ${a.term} (${[...a.candidates].join()}) wrote ` +
            `${time(a.first)}..${time(a.last)}, term ${b.term} (${[...b.candidates].join()}) ${time(b.first)}..${time(b.last)}`
        )
      }
    }
  }
  return problems
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = values.toSorted((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** Every check, and the summary lines that report the figures and the bounds either way. */
export const verdict = (
  seen: ReadonlyArray<Sighting>,
  log: ReadonlyArray<Heard>,
  measured: Measurements,
  bounds: Bounds,
  time: (at: number) => string
): Verdict => {
  const problems = [...measured.problems, ...observerProblems(seen, time), ...writeProblems(log, time)]
  const changeBound = bounds.leaseMillis + bounds.observeMillis + bounds.slackMillis
  const resignBound = bounds.resignMillis + bounds.slackMillis
  const resignMedian = median(measured.resigns.map((change) => change.millis))
  for (const [what, change] of [
    ["kill", measured.kill],
    ["freeze", measured.freeze]
  ] as const) {
    if (change.millis > changeBound) {
      problems.push(`the change after the ${what} was seen after ${change.millis} ms, over its ${changeBound} ms bound`)
    }
  }
  if (resignMedian > resignBound) {
    problems.push(`resign handovers were seen after ${resignMedian} ms at the median, over the ${resignBound} ms bound`)
  }
  const count = (ok: boolean) => log.filter(({ event }) => event.t === "work" && event.ok === ok).length
  const terms = new Set(log.flatMap(({ event }) => (event.t === "work" && event.ok ? [event.term] : []))).size
  const failed = log.filter(({ event }) => event.t === "error").length
  const slack = bounds.slackMillis > 0 ? ` (lease + observer interval + ${bounds.slackMillis} ms slack)` : ""
  const lines = [
    `kill   -> new leader seen: ${measured.kill.millis} ms (${measured.kill.from} -> ${measured.kill.to}), bound ${changeBound} ms${slack}`,
    `freeze -> new leader seen: ${measured.freeze.millis} ms (${measured.freeze.from} -> ${measured.freeze.to}), bound ${changeBound} ms${slack}`,
    `resign -> new leader seen: median ${resignMedian} ms, bound ${resignBound} ms ` +
      `(each: ${measured.resigns.map((change) => `${change.millis}`).join(", ")} ms)`,
    `writes: ${count(true)} accepted in ${terms} terms, ${count(false)} rejected by the fence, ${failed} failed`,
    problems.length === 0
      ? "PASS: one leader at a time, terms only went up, every change seen within its bound"
      : `FAIL: ${problems.length} problem(s)`,
    ...problems.map((problem) => `  - ${problem}`)
  ]
  return { problems, lines }
}
