// The checker on hand-made histories: what each of its history checks catches and what it lets
// pass, without servers (the cells in faults.test.ts show it on real runs).
import { assert, describe, it } from "@effect/vitest"
import { check, type WorkerFault } from "../checker.ts"
import { takeoverMillis } from "../history.ts"
import type { WorkerLine } from "../protocol.ts"

type Lines = Array<{ readonly worker: number; readonly line: WorkerLine }>

const ms = 1000

/** One call on `key`: begins at `begin`, body from `entered` to `left` (ms) with `token`, returns `ok` 1 ms later. */
const call = (
  worker: number,
  id: string,
  key: string,
  times: { begin: number; entered?: number; left?: number; ended?: boolean },
  token = 0
): Lines => {
  const lines: Lines = [{ worker, line: ["B", id, key, times.begin * ms] }]
  if (times.entered !== undefined) lines.push({ worker, line: ["E", id, times.entered * ms, 100, token] })
  if (times.left !== undefined) lines.push({ worker, line: ["L", id, times.left * ms] })
  const end = times.left ?? times.entered ?? times.begin
  if (times.ended !== false) lines.push({ worker, line: ["X", id, (end + 1) * ms, "ok", ""] })
  return lines
}

/** Worker 1 holds k0 from 10 ms until `releasedAt`; worker 2 waits from 15 ms; worker 3 from 18, entering at 3100. */
const waitersOfOneKey = (releasedAt: number): Lines => [
  ...call(1, "1.0.0", "k0", { begin: 0, entered: 10, left: releasedAt }, 100),
  ...call(2, "2.0.0", "k0", { begin: 15, ended: false }),
  ...call(3, "3.0.0", "k0", { begin: 18, entered: 3100, left: 3110 }, 200)
]

const run = (lines: Lines, workerFaults: ReadonlyArray<WorkerFault> = []) =>
  check({
    lines,
    waitTimeoutMillis: 4000,
    workerFaults,
    healedAt: 0,
    endedAt: 20_000 * ms,
    expectedErrorCodes: [],
    leaseMillis: 3000,
    clockOffset: undefined
  }).history

describe("fault matrix checker: grant history", () => {
  it("accepts tokens that grow with the grants of a key, whatever other keys do", () => {
    const history = run([
      ...call(1, "1.0.0", "k0", { begin: 0, entered: 10, left: 20 }, 100),
      ...call(2, "2.0.0", "k0", { begin: 5, entered: 21, left: 30 }, 200),
      ...call(1, "1.1.0", "k1", { begin: 0, entered: 10, left: 20 }, 50)
    ])
    assert.strictEqual(history.grants, 3)
    assert.deepStrictEqual(history.tokenViolations, [])
  })

  it("reports a body that left before another entered with a token not below it, and a shared token", () => {
    const history = run([
      ...call(1, "1.0.0", "k0", { begin: 0, entered: 10, left: 20 }, 300),
      ...call(2, "2.0.0", "k0", { begin: 5, entered: 25, left: 30 }, 200),
      ...call(2, "2.0.1", "k0", { begin: 31, entered: 40, left: 50 }, 400),
      ...call(1, "1.0.1", "k0", { begin: 31, entered: 60, left: 70 }, 400)
    ])
    assert.deepStrictEqual(
      history.tokenViolations.map((v) => `${v.kind} ${v.earlier.id} ${v.later.id}`),
      ["order 1.0.0 2.0.0", "order 2.0.1 1.0.1"]
    )
  })

  it("reports two grants of one key with one token even when their bodies overlap", () => {
    const history = run([
      ...call(1, "1.0.0", "k0", { begin: 0, entered: 10, left: 40 }, 300),
      ...call(2, "2.0.0", "k0", { begin: 5, entered: 20, left: 30 }, 300)
    ])
    assert.deepStrictEqual(
      history.tokenViolations.map((v) => `${v.kind} ${v.earlier.id} ${v.later.id}`),
      ["duplicate 1.0.0 2.0.0"]
    )
  })

  it("orders a killed holder by its kill: a body entering after it must hold a larger token", () => {
    const history = run(
      [
        ...call(1, "1.0.0", "k0", { begin: 0, entered: 10, ended: false }, 300),
        ...call(2, "2.0.0", "k0", { begin: 5, entered: 3100, left: 3200 }, 200)
      ],
      [{ worker: 1, from: 50 * ms, to: Infinity }]
    )
    assert.deepStrictEqual(
      history.tokenViolations.map((v) => `${v.kind} ${v.earlier.id} ${v.later.id}`),
      ["order 1.0.0 2.0.0"]
    )
    assert.strictEqual(history.endings.killed, 1)
    assert.deepStrictEqual(history.takeovers.map(takeoverMillis), [3050])
  })

  it("owes a killed holder's key only to calls still waiting when its lease has surely ended", () => {
    const killedHolder = call(1, "1.0.0", "k0", { begin: 0, entered: 10, ended: false }, 100)
    const kill: ReadonlyArray<WorkerFault> = [{ worker: 1, from: 50 * ms, to: Infinity }]
    // Waits from 5 ms and gives up at 2900 ms, before the lease (3000 ms from the kill) is over; the
    // next call comes at 6000 ms and finds the key free: nobody was kept from it.
    const gaveUp = run(
      [
        ...killedHolder,
        { worker: 2, line: ["B", "2.0.0", "k0", 5 * ms] },
        { worker: 2, line: ["X", "2.0.0", 2900 * ms, "TimedOut", ""] },
        ...call(3, "3.0.0", "k0", { begin: 6000, entered: 6000, left: 6010 }, 200)
      ],
      kill
    )
    assert.deepStrictEqual(
      gaveUp.takeovers.map((t) => [t.awaited, takeoverMillis(t)]),
      [[false, 5950]]
    )
    // Still waiting at 3100 ms and served only at 6000 ms: the takeover was owed and came late.
    const kept = run([...killedHolder, ...call(2, "2.0.0", "k0", { begin: 5, entered: 6000, left: 6010 }, 200)], kill)
    assert.deepStrictEqual(
      kept.takeovers.map((t) => [t.awaited, takeoverMillis(t)]),
      [[true, 5950]]
    )
  })

  it("reports a grant that never ended while its worker lived", () => {
    const history = run([...call(1, "1.0.0", "k0", { begin: 0, entered: 10, ended: false }, 300)])
    assert.deepStrictEqual(
      history.endings.open.map((c) => c.id),
      ["1.0.0"]
    )
  })

  it("measures how long a free key kept live waiters waiting, not counting a killed holder's lease", () => {
    const history = run(
      [
        ...call(1, "1.0.0", "k0", { begin: 0, entered: 10, left: 20 }, 100),
        // Waits from 15 ms; the key is free from 20 to 620 ms.
        ...call(2, "2.0.0", "k0", { begin: 15, entered: 620, left: 640 }, 200),
        // Killed inside at 700 ms: its key counts as held until 3700 ms, so the wait that ends at
        // 3750 ms is idle for 50 ms only.
        ...call(3, "3.0.0", "k0", { begin: 650, entered: 660, ended: false }, 300),
        ...call(2, "2.0.1", "k0", { begin: 645, entered: 3750, left: 3760 }, 400)
      ],
      [{ worker: 3, from: 700 * ms, to: Infinity }]
    )
    const idle = history.longestIdle
    assert.deepStrictEqual([idle?.from, idle?.to, idle?.waiting], [20 * ms, 620 * ms, ["2.0.0"]])
    assert.deepStrictEqual(history.takeovers.map(takeoverMillis), [3050])
  })

  it("does not count a paused or killed worker's waits as keeping a key idle", () => {
    const history = run(
      [
        ...call(1, "1.0.0", "k0", { begin: 0, entered: 10, left: 30 }, 100),
        ...call(2, "2.0.0", "k0", { begin: 15, ended: false }),
        ...call(3, "3.0.0", "k0", { begin: 15, entered: 2050, left: 2060 }, 200)
      ],
      [
        { worker: 2, from: 25 * ms, to: Infinity },
        { worker: 3, from: 18 * ms, to: 1990 * ms }
      ]
    )
    const idle = history.longestIdle
    // Worker 2 died waiting at 25 ms, worker 3 was stopped from 18 to 1990 ms: idle only after that.
    assert.deepStrictEqual([idle?.from, idle?.to], [1990 * ms, 2050 * ms])
  })

  it("counts a key as held for a lease by a call killed while waiting on it free, not while another body held it", () => {
    // Worker 2 is killed at 22 ms, waiting.
    const killed: ReadonlyArray<WorkerFault> = [{ worker: 2, from: 22 * ms, to: Infinity }]
    // The key was free at the kill: worker 2's call may have taken it, its body not yet entered, and
    // then the key stays held until 3022 ms. Idle only from there.
    const free = run(waitersOfOneKey(20), killed).longestIdle
    assert.deepStrictEqual([free?.from, free?.to], [3022 * ms, 3100 * ms])
    // Worker 1's body held the key at the kill: worker 2's call held nothing, and the 3 s the key then
    // stood free with worker 3 waiting are idle.
    const held = run(waitersOfOneKey(30), killed).longestIdle
    assert.deepStrictEqual([held?.from, held?.to], [30 * ms, 3100 * ms])
  })
})
