// The checker on hand-made semaphore histories: what fails a semaphore cell (permits over the limit,
// tokens out of order, a dead holder's permits never back) and what passes, without servers (the
// semaphore cells in faults.test.ts show it on real runs).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { check, type WorkerFault } from "../checker.ts"
import type { Outcome, WorkerLine } from "../protocol.ts"
import type { Expectation, Scenario } from "../scenario.ts"
import { problemsOf } from "../verdict.ts"

type Lines = Array<{ readonly worker: number; readonly line: WorkerLine }>

const ms = 1000

/**
 * One `withPermits` call for `permits` of `limit` on `key`: begins at `begin`, body from `entered`
 * to `left` (ms) with `token`, returns with `outcome` 1 ms after its body, at `ended` when that is a
 * time, or never (`ended: false`).
 */
const call = (
  worker: number,
  id: string,
  times: { begin: number; entered?: number; left?: number; ended?: boolean | number },
  options: { permits?: number; limit?: number; token?: number; outcome?: Outcome; key?: string } = {}
): Lines => {
  const { permits = 1, limit = 2, token = 0, outcome = "ok", key = "k0" } = options
  const lines: Lines = [{ worker, line: ["B", id, key, times.begin * ms, permits, limit] }]
  if (times.entered !== undefined) lines.push({ worker, line: ["E", id, times.entered * ms, 100, token] })
  if (times.left !== undefined) lines.push({ worker, line: ["L", id, times.left * ms] })
  const end = typeof times.ended === "number" ? times.ended : (times.left ?? times.entered ?? times.begin) + 1
  const detail = outcome === "ok" ? "" : outcome === "TimedOut" ? "busy" : "renew/expired"
  if (times.ended !== false) lines.push({ worker, line: ["X", id, end * ms, outcome, detail] })
  return lines
}

const counts = (lines: Lines, workerFaults: ReadonlyArray<WorkerFault> = []) =>
  check({
    lines,
    waitTimeoutMillis: 4000,
    workerFaults,
    healedAt: 0,
    endedAt: 20_000 * ms,
    expectedErrorCodes: [],
    leaseMillis: 3000,
    clockOffset: undefined
  })

const scenario = (expect: Expectation): Scenario => ({
  id: "semaphore-made-up",
  fault: "none",
  deployments: ["standalone"],
  expect,
  semaphore: true,
  why: "a hand-made history",
  inject: () => Effect.void
})

/** The problems that fail a cell with this history, under `expect`. */
const problems = (
  lines: Lines,
  expect: Expectation,
  workerFaults: ReadonlyArray<WorkerFault> = [],
  clockStepMillis?: number
) =>
  problemsOf({
    scenario: scenario(expect),
    counts: counts(lines, workerFaults),
    leftovers: undefined,
    leaseMillis: 3000,
    faultStartedAt: 0,
    healedAt: 0,
    clockStepMillis
  })

/** The over-the-limit problems of an exclusion cell whose servers' clock moved `step` ms. */
const overLimitUnderStep = (lines: Lines, step: number) =>
  problems(lines, "exclusion", [], step).filter((p) => p.includes("over the limit"))

// Three permits held at once under limit 2, from 30 to 40 ms: 1.0.0 (1 permit, 10..50 ms) with
// 2.0.0 (2 permits, 30..40 ms); before and after, 1.0.0 alone or with 1.1.0 (1 permit) is at the limit.
const threeOfTwo = (outcomeOfSecond: Outcome = "ok"): Lines => [
  ...call(1, "1.0.0", { begin: 0, entered: 10, left: 50 }, { token: 100 }),
  ...call(1, "1.1.0", { begin: 0, entered: 12, left: 29 }, { token: 101 }),
  ...call(2, "2.0.0", { begin: 5, entered: 30, left: 40 }, { permits: 2, token: 102, outcome: outcomeOfSecond })
]

/**
 * A holder of 1 of 2 permits (worker 3) killed at 100 ms, worker 1 leaving at 160 ms, and worker 2,
 * waiting for 2 permits from 150 ms, entering at `entered` ms.
 */
const deadHolderHistory = (entered: number): Lines => [
  ...call(3, "3.0.0", { begin: 0, entered: 10, ended: false }, { token: 100 }),
  ...call(1, "1.0.0", { begin: 0, entered: 20, left: 160 }, { token: 101 }),
  ...call(2, "2.0.0", { begin: 150, entered, left: entered + 50 }, { permits: 2, token: 102 })
]

describe("fault matrix checker: semaphores", () => {
  it("fails a cell where three permits are held at once under limit 2", () => {
    const found = counts(threeOfTwo())
    assert.deepStrictEqual(
      found.overLimit.map((e) => [
        e.key,
        e.held,
        e.limit,
        e.from / ms,
        e.to / ms,
        e.holders.map((c) => c.id).toSorted()
      ]),
      [["k0", 3, 2, 30, 40, ["1.0.0", "2.0.0"]]]
    )
    assert.strictEqual(found.peakPermits, 3)
    // Several bodies inside together is what a semaphore is for: no lock overlap is reported.
    assert.deepStrictEqual(found.overlaps, [])
    const failed = problems(threeOfTwo(), "exclusion")
    assert.isTrue(
      failed.some((p) => p.startsWith("over the limit where exclusion is promised: k0: 3 permits of 2")),
      failed.join("\n")
    )
  })

  it("under a violation verdict, fails the stretch over the limit unless one of its holders got LockLost", () => {
    assert.isTrue(problems(threeOfTwo(), "violation").some((p) => p.startsWith("silently over the limit")))
    const surfaced = counts(threeOfTwo("LockLost"))
    assert.deepStrictEqual(
      surfaced.overLimit.map((e) => e.surfaced),
      [true]
    )
    assert.deepStrictEqual(
      problems(threeOfTwo("LockLost"), "violation").filter((p) => p.includes("over the limit")),
      []
    )
  })

  it("under a stepped server clock, fails only an excess that no holder saw as LockLost, even where exclusion is promised", () => {
    // A forward step ends leases early on the server: the loss must surface, as under a violation verdict.
    assert.deepStrictEqual(overLimitUnderStep(threeOfTwo("LockLost"), 4490), [])
    assert.isTrue(overLimitUnderStep(threeOfTwo(), 4490).some((p) => p.startsWith("silently over the limit")))
    // Drift within the tolerance is no step: every excess fails.
    assert.isTrue(
      overLimitUnderStep(threeOfTwo("LockLost"), 3).some((p) =>
        p.startsWith("over the limit where exclusion is promised")
      )
    )
  })

  it("passes bodies that hold the limit and no more, a hand-off in one microsecond included", () => {
    const lines = [
      ...call(1, "1.0.0", { begin: 0, entered: 10, left: 30 }, { token: 100 }),
      ...call(2, "2.0.0", { begin: 0, entered: 12, left: 20 }, { token: 101 }),
      // Enters the microsecond 2.0.0 leaves.
      ...call(2, "2.1.0", { begin: 15, entered: 20, left: 40 }, { token: 102 }),
      ...call(1, "1.1.0", { begin: 15, entered: 30, left: 45 }, { permits: 2, limit: 3, key: "k1", token: 5 })
    ]
    const found = counts(lines)
    assert.deepStrictEqual(found.overLimit, [])
    assert.strictEqual(found.peakPermits, 2)
    assert.deepStrictEqual(problems(lines, "exclusion"), [])
  })

  it("splits a stretch over the limit where its set of holders changes, and counts each", () => {
    const found = counts([
      ...call(1, "1.0.0", { begin: 0, entered: 10, left: 50 }, { token: 100 }),
      ...call(2, "2.0.0", { begin: 0, entered: 20, left: 40 }, { token: 101 }),
      ...call(3, "3.0.0", { begin: 0, entered: 30, left: 60 }, { token: 102 })
    ])
    assert.deepStrictEqual(
      found.overLimit.map((e) => [e.from / ms, e.to / ms]),
      [[30, 40]]
    )
    const four = counts([
      ...call(1, "1.0.0", { begin: 0, entered: 10, left: 50 }, { token: 100, limit: 1 }),
      ...call(2, "2.0.0", { begin: 0, entered: 20, left: 40 }, { token: 101, limit: 1 }),
      ...call(3, "3.0.0", { begin: 0, entered: 30, left: 60 }, { token: 102, limit: 1 })
    ])
    assert.deepStrictEqual(
      four.overLimit.map((e) => [e.held, e.from / ms, e.to / ms]),
      [
        [2, 20, 30],
        [3, 30, 40],
        [2, 40, 50]
      ]
    )
  })

  it("counts a grant that entered after another's body left with a token not above it, and a shared token", () => {
    const lines = [
      ...call(1, "1.0.0", { begin: 0, entered: 10, left: 20 }, { token: 300 }),
      // Inside together with 1.0.0 (a semaphore lets both in): any order between them is fine.
      ...call(2, "2.0.0", { begin: 0, entered: 12, left: 30 }, { token: 200 }),
      // Entered after 1.0.0 left, with a smaller token: out of order.
      ...call(2, "2.1.0", { begin: 31, entered: 35, left: 50 }, { token: 250 }),
      // Inside together with 2.1.0, with its token.
      ...call(1, "1.1.0", { begin: 31, entered: 40, left: 45 }, { token: 250 })
    ]
    const found = counts(lines)
    assert.deepStrictEqual(found.overLimit, [])
    assert.deepStrictEqual(
      found.history.tokenViolations.map((v) => `${v.kind} ${v.earlier.id} ${v.later.id}`),
      ["order 1.0.0 2.1.0", "order 1.0.0 1.1.0"]
    )
    const shared = counts([
      ...call(1, "1.0.0", { begin: 0, entered: 10, left: 40 }, { token: 300 }),
      ...call(2, "2.0.0", { begin: 0, entered: 20, left: 30 }, { token: 300 })
    ])
    assert.deepStrictEqual(
      shared.history.tokenViolations.map((v) => `${v.kind} ${v.earlier.id} ${v.later.id}`),
      ["duplicate 1.0.0 2.0.0"]
    )
    // Failed under exclusion, counted (not failed) under violation.
    assert.isTrue(problems(lines, "exclusion").some((p) => p.startsWith("token order: k0: 1.0.0")))
    assert.deepStrictEqual(
      problems(lines, "violation").filter((p) => p.startsWith("token order")),
      []
    )
  })

  it("counts, and does not fail, an inversion that grant order explains: the later call began before the earlier body entered", () => {
    // 2.0.0 was under way (from 5 ms) when 1.0.0's body entered (10 ms): its grant may be the older
    // one and have reached its body late, after 1.0.0's whole body on another permit.
    const explained = [
      ...call(1, "1.0.0", { begin: 0, entered: 10, left: 20 }, { token: 300 }),
      ...call(2, "2.0.0", { begin: 5, entered: 25, left: 30 }, { token: 200 })
    ]
    assert.deepStrictEqual(
      counts(explained).history.tokenViolations.map(
        (v) => `${v.kind} ${v.earlier.id} ${v.later.id} ${v.inGrantOrder === true}`
      ),
      ["order 1.0.0 2.0.0 true"]
    )
    assert.deepStrictEqual(problems(explained, "exclusion"), [])
    // 3.0.0's body entered (2 ms) before 2.0.0's call began (5 ms), with a token above 2.0.0's: grant
    // order forbids that one, whatever 1.0.0 explains.
    const forbidden = [...explained, ...call(3, "3.0.0", { begin: 0, entered: 2, left: 8 }, { token: 250 })]
    assert.deepStrictEqual(
      counts(forbidden).history.tokenViolations.map(
        (v) => `${v.kind} ${v.earlier.id} ${v.later.id} ${v.inGrantOrder === true}`
      ),
      ["order 3.0.0 2.0.0 false"]
    )
    assert.isTrue(problems(forbidden, "exclusion").some((p) => p.startsWith("token order: k0: 3.0.0")))
  })

  it("fails a cell where the line goes without a killed holder's permits for more than 1 s after its lease", () => {
    // Worker 3 dies at 100 ms holding 1 of 2 permits; from 150 ms worker 2 waits for 2 permits, and
    // from 160 ms (worker 1 leaves) only the dead one keeps it waiting. Its lease runs out by 3100 ms.
    const kill: Array<WorkerFault> = [{ worker: 3, from: 100 * ms, to: Infinity }]
    const history = deadHolderHistory
    const stuck = (entered: number) =>
      counts(history(entered), kill).history.takeovers.map((t) => [
        t.awaited,
        t.stuck === undefined ? undefined : [t.stuck.from / ms, t.stuck.to / ms],
        t.next?.id
      ])
    assert.deepStrictEqual(stuck(3200), [[true, [3100, 3200], "2.0.0"]])
    assert.deepStrictEqual(
      problems(history(3200), "exclusion", kill).filter((p) => p.includes("killed holder")),
      []
    )
    // Back before the lease could have run out (a grant's claim window is shorter): nothing to wait for.
    assert.deepStrictEqual(stuck(600), [[false, undefined, "2.0.0"]])
    assert.deepStrictEqual(stuck(5000), [[true, [3100, 5000], "2.0.0"]])
    const late = problems(history(5000), "exclusion", kill)
    assert.isTrue(
      late.some((p) =>
        p.startsWith(
          "the permits of a killed holder were not back in use after its lease: the head of the line needed them for 1900 ms"
        )
      ),
      late.join("\n")
    )
  })

  it("does not count the dead permits as needed while the head of the line asks for more than they would free", () => {
    // Limit 3. Worker 3 dies at 100 ms holding 1; worker 1 holds 2 from 200 to 5000 ms. From 300 ms
    // 2.0.0 waits for 2 at the head of the line (the dead permit would not serve it) until it times
    // out at 4300 ms; 4.0.0, behind it, waits for 1 and enters right then.
    const kill: Array<WorkerFault> = [{ worker: 3, from: 100 * ms, to: Infinity }]
    const lines = [
      ...call(3, "3.0.0", { begin: 0, entered: 10, ended: false }, { limit: 3, token: 100 }),
      ...call(1, "1.0.0", { begin: 200, entered: 200, left: 5000 }, { permits: 2, limit: 3, token: 101 }),
      ...call(2, "2.0.0", { begin: 300, ended: 4300 }, { permits: 2, limit: 3, outcome: "TimedOut" }),
      ...call(4, "4.0.0", { begin: 310, entered: 4301, left: 4400 }, { limit: 3, token: 102 })
    ]
    const takeovers = counts(lines, kill).history.takeovers
    assert.deepStrictEqual(
      takeovers.map((t) => [
        t.awaited,
        t.stuck === undefined ? undefined : [t.stuck.from / ms, t.stuck.to / ms],
        t.next?.id
      ]),
      [[true, [4300, 4301], "4.0.0"]]
    )
    assert.deepStrictEqual(
      problems(lines, "exclusion", kill).filter((p) => p.includes("killed holder")),
      []
    )
  })

  it("does not require a dead holder's permits back while live calls never needed them", () => {
    const kill: Array<WorkerFault> = [{ worker: 3, from: 100 * ms, to: Infinity }]
    const lines = [
      ...call(3, "3.0.0", { begin: 0, entered: 10, ended: false }, { token: 100 }),
      // One permit of the two at a time: the one the dead holder keeps is never wanted.
      ...call(1, "1.0.0", { begin: 200, entered: 200, left: 300 }, { token: 101 }),
      ...call(1, "1.0.1", { begin: 400, entered: 400, left: 500 }, { token: 102 })
    ]
    assert.deepStrictEqual(
      counts(lines, kill).history.takeovers.map((t) => t.awaited),
      [false]
    )
    assert.deepStrictEqual(
      problems(lines, "exclusion", kill).filter((p) => p.includes("killed holder")),
      []
    )
  })
})
