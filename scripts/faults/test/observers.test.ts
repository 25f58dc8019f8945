// The checker's observer rule (observers.ts) on hand-made election histories: what an observer may
// show (terms in order, nobody between them, a later revision of the term shown) and what fails an
// election cell whatever its expectation (a term going back, an ended term shown again, one state
// twice in a row, a term nobody was granted or shown with another candidate), without servers (the
// election cells in faults.test.ts show it on real runs).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { check } from "../checker.ts"
import { describeObserverViolation } from "../observers.ts"
import type { WorkerLine } from "../protocol.ts"
import type { Expectation, Scenario } from "../scenario.ts"
import { problemsOf } from "../verdict.ts"

type Lines = Array<{ readonly worker: number; readonly line: WorkerLine }>

const ms = 1000

/**
 * One election call `<worker>.<fiber>.<n>` on `key`: begins at `begin`, its campaign returns with
 * `term` at `granted`, its body runs from `granted` to `left` (ms), and it returns `ok` 1 ms later.
 */
const term = (id: string, key: string, times: { begin: number; granted: number; left: number }, value: number) => {
  const worker = Number(id.split(".")[0])
  const lines: Lines = [
    { worker, line: ["B", id, key, times.begin * ms] },
    { worker, line: ["G", id, times.granted * ms, value] },
    { worker, line: ["E", id, times.granted * ms, 100, value] },
    { worker, line: ["L", id, times.left * ms] },
    { worker, line: ["X", id, (times.left + 1) * ms, "ok", ""] }
  ]
  return lines
}

/** What worker `worker`'s observer of `key` showed at `at` ms: a term (revision 1 unless given) by `candidate`, or nobody. */
const seen = (
  worker: number,
  key: string,
  at: number,
  state?: { readonly term: number; readonly candidate: string; readonly revision?: number }
): Lines => [
  {
    worker,
    line:
      state === undefined
        ? ["O", key, at * ms, null, null, null]
        : ["O", key, at * ms, state.term, state.revision ?? 1, state.candidate]
  }
]

// Three terms of k0: 100 (w1-f0), 200 (w2-f1), 300 (w1-f2), one after another.
const grants: Lines = [
  ...term("1.0.0", "k0", { begin: 0, granted: 10, left: 20 }, 100),
  ...term("2.1.0", "k0", { begin: 5, granted: 25, left: 40 }, 200),
  ...term("1.2.0", "k0", { begin: 30, granted: 45, left: 60 }, 300)
]

/** The observers' verdict on `lines`, with workers paused or killed as `workerFaults` says. */
const observersOf = (
  lines: Lines,
  workerFaults: ReadonlyArray<{ readonly worker: number; readonly from: number; readonly to: number }> = [],
  clockOffset?: { readonly low: number; readonly high: number }
) =>
  check({
    lines,
    waitTimeoutMillis: 4000,
    workerFaults,
    healedAt: 0,
    endedAt: 20_000 * ms,
    expectedErrorCodes: [],
    leaseMillis: 3000,
    clockOffset
  }).observers

/** The servers' clock as the monotonic one + 1 s (within 50 µs). */
const secondAhead = { low: 1_000_000 - 50, high: 1_000_000 + 50 }

const violations = (lines: Lines): Array<string> =>
  (observersOf(lines)?.violations ?? []).map((v) => `${v.kind} ${v.state.worker} ${v.state.term ?? "nobody"}`)

const scenario = (expect: Expectation): Scenario => ({
  id: "election-made-up",
  fault: "none",
  deployments: ["standalone"],
  expect,
  election: true,
  why: "a hand-made history",
  inject: () => Effect.void
})

const problems = (lines: Lines, expect: Expectation) =>
  problemsOf({
    scenario: scenario(expect),
    counts: check({
      lines,
      waitTimeoutMillis: 4000,
      workerFaults: [],
      healedAt: 0,
      endedAt: 20_000 * ms,
      expectedErrorCodes: [],
      leaseMillis: 3000,
      clockOffset: undefined
    }),
    leftovers: undefined,
    leaseMillis: 3000,
    faultStartedAt: 0,
    healedAt: 0
  })

describe("fault matrix checker: election observers", () => {
  it("accepts terms in order, nobody between them, a later revision, terms skipped, and one observer per worker and key", () => {
    const lines: Lines = [
      ...grants,
      ...term("2.0.0", "k1", { begin: 0, granted: 12, left: 18 }, 150),
      ...seen(1, "k0", 1),
      ...seen(1, "k0", 11, { term: 100, candidate: "w1-f0" }),
      ...seen(1, "k0", 15, { term: 100, candidate: "w1-f0", revision: 2 }),
      ...seen(1, "k0", 22),
      ...seen(1, "k0", 26, { term: 200, candidate: "w2-f1" }),
      ...seen(1, "k0", 46, { term: 300, candidate: "w1-f2" }),
      ...seen(1, "k0", 61),
      // Worker 2's observer missed term 200: the order of what is shown is what counts.
      ...seen(2, "k0", 2),
      ...seen(2, "k0", 12, { term: 100, candidate: "w1-f0" }),
      ...seen(2, "k0", 47, { term: 300, candidate: "w1-f2" }),
      // Its observer of k1: another election, whose terms are k1's (150 is below k0's 300).
      ...seen(2, "k1", 13, { term: 150, candidate: "w2-f0" }),
      ...seen(2, "k1", 19)
    ]
    const observers = observersOf(lines)
    assert.deepStrictEqual(observers?.violations.map(describeObserverViolation), [])
    assert.deepStrictEqual(
      [observers?.states, observers?.leaders, observers?.termsShown, observers?.streams],
      [12, 7, 4, 3]
    )
    assert.deepStrictEqual(problems(lines, "exclusion"), [])
  })

  it("fails a term going back: a lower term, or a lower revision of the term shown", () => {
    assert.deepStrictEqual(
      violations([
        ...grants,
        ...seen(1, "k0", 26, { term: 200, candidate: "w2-f1" }),
        ...seen(1, "k0", 27, { term: 100, candidate: "w1-f0" }),
        ...seen(1, "k0", 46, { term: 300, candidate: "w1-f2", revision: 2 }),
        ...seen(1, "k0", 47, { term: 300, candidate: "w1-f2", revision: 1 })
      ]),
      ["back 1 100", "back 1 300"]
    )
  })

  it("fails an ended term shown again after nobody led", () => {
    assert.deepStrictEqual(
      violations([
        ...grants,
        ...seen(1, "k0", 11, { term: 100, candidate: "w1-f0" }),
        ...seen(1, "k0", 22),
        ...seen(1, "k0", 23, { term: 100, candidate: "w1-f0", revision: 2 })
      ]),
      ["ended 1 100"]
    )
  })

  it("fails one state twice in a row: the same term and revision, or nobody twice", () => {
    assert.deepStrictEqual(
      violations([
        ...grants,
        ...seen(1, "k0", 1),
        ...seen(1, "k0", 2),
        ...seen(1, "k0", 11, { term: 100, candidate: "w1-f0" }),
        ...seen(1, "k0", 12, { term: 100, candidate: "w1-f0" })
      ]),
      ["repeated 1 nobody", "repeated 1 100"]
    )
  })

  it("fails a term no worker was granted on that election, and a term shown with another candidate", () => {
    assert.deepStrictEqual(
      violations([
        ...grants,
        ...seen(1, "k0", 11, { term: 100, candidate: "w1-f0" }),
        // 250 was never granted; 150 is a grant of k1, not of k0.
        ...seen(1, "k0", 26, { term: 250, candidate: "w2-f1" }),
        ...term("2.0.0", "k1", { begin: 0, granted: 12, left: 18 }, 150),
        ...seen(2, "k0", 13, { term: 150, candidate: "w2-f0" }),
        // 200 was granted to 2.1.0, campaigning as w2-f1.
        ...seen(1, "k0", 27),
        ...seen(1, "k0", 28, { term: 300, candidate: "w2-f1" })
      ]),
      // Per observer, in the order each showed them.
      ["unknown 1 250", "candidate 1 300", "unknown 2 150"]
    )
  })

  it("counts a term from the campaign's G line even when its body never entered", () => {
    const lines: Lines = [
      { worker: 1, line: ["B", "1.0.0", "k0", 0] },
      { worker: 1, line: ["G", "1.0.0", 10 * ms, 100] },
      { worker: 1, line: ["X", "1.0.0", 11 * ms, "LockLost", "renew/expired"] },
      ...seen(2, "k0", 10, { term: 100, candidate: "w1-f0" })
    ]
    assert.deepStrictEqual(violations(lines), [])
  })

  it("counts a term won by a killed worker's campaign before it could write it, and nothing else of a killed worker", () => {
    // Worker 1 is killed at 100 ms while 1.2.1 campaigns for k0 (begun at 80 ms, nothing after) and
    // 1.3.1 for k1; the servers' clock is the monotonic one + 1 s.
    const lines: Lines = [
      ...grants,
      { worker: 1, line: ["B", "1.2.1", "k0", 80 * ms] },
      { worker: 1, line: ["B", "1.3.1", "k1", 80 * ms] },
      ...seen(2, "k0", 46, { term: 300, candidate: "w1-f2" }),
      // Won at 99 ms on the monotonic clock: its grant.
      ...seen(2, "k0", 101, { term: 1_099_000, candidate: "w1-f2" }),
      // After the kill: no grant of the dead worker.
      ...seen(2, "k0", 200, { term: 1_150_000, candidate: "w1-f2" }),
      // Another fiber of the dead worker, which was not campaigning for k0.
      ...seen(2, "k0", 201, { term: 1_160_000, candidate: "w1-f3" })
    ]
    const observers = observersOf(lines, [{ worker: 1, from: 100 * ms, to: Infinity }], secondAhead)
    assert.strictEqual(observers?.unreported, 1)
    assert.deepStrictEqual(
      observers?.violations.map((v) => `${v.kind} ${v.state.term}`),
      ["unknown 1150000", "unknown 1160000"]
    )
  })

  it("counts a term a campaign proclaimed and gave back (its lock lost first), within the call's span", () => {
    // The servers' clock is the monotonic one + 1 s. 2.0.1 campaigns for k1 from 100 ms, wins at
    // 150 ms, loses that lock while proclaiming, wins again at 400 ms (term 1_400_000) and leads.
    // 2.0.2 campaigns from 600 ms, wins and gives back at 650 ms, and times out at 900 ms.
    const lines: Lines = [
      ...term("2.0.1", "k1", { begin: 100, granted: 400, left: 450 }, 1_400_000),
      { worker: 2, line: ["B", "2.0.2", "k1", 600 * ms] },
      { worker: 2, line: ["X", "2.0.2", 900 * ms, "TimedOut", "busy"] },
      ...seen(1, "k1", 160, { term: 1_150_000, candidate: "w2-f0" }),
      ...seen(1, "k1", 401, { term: 1_400_000, candidate: "w2-f0" }),
      ...seen(1, "k1", 660, { term: 1_650_000, candidate: "w2-f0" }),
      // After 2.0.2 ended: nobody of w2-f0 campaigned then.
      ...seen(1, "k1", 960, { term: 1_950_000, candidate: "w2-f0" }),
      // Before 2.0.1 began.
      ...seen(2, "k1", 100, { term: 1_050_000, candidate: "w2-f0" })
    ]
    const observers = observersOf(lines, [], secondAhead)
    assert.strictEqual(observers?.unreported, 2)
    assert.deepStrictEqual(
      observers?.violations.map((v) => `${v.kind} ${v.state.term}`),
      ["unknown 1950000", "unknown 1050000"]
    )
  })

  it("fails the cell on an observer violation or failure even where a violation of exclusion is expected", () => {
    const lines: Lines = [
      ...grants,
      ...seen(1, "k0", 26, { term: 200, candidate: "w2-f1" }),
      ...seen(1, "k0", 27, { term: 100, candidate: "w1-f0" }),
      { worker: 2, line: ["OX", "k1", 30 * ms, "LockRedisError NOPERM: EVALSHA: no permission"] }
    ]
    const found = problems(lines, "violation").filter((problem) => problem.startsWith("observer"))
    assert.deepStrictEqual(found, [
      "observer order: worker 1's observer of k0 went back: term 100 rev 1 (w1-f0) at 27.0 after term 200 rev 1 (w2-f1) at 26.0",
      "observer failed: worker 2's observer of k1 failed: LockRedisError NOPERM: EVALSHA: no permission"
    ])
  })

  it("fails an election cell whose observers never showed a leader", () => {
    const lines: Lines = [...grants, ...seen(1, "k0", 1)]
    assert.include(problems(lines, "exclusion"), "the observers showed no leader at all")
  })
})
