// The demo's bookkeeping and everything it prints: a tally of worker events, the live progress line
// and the final summary with the balance check. Pure functions over one mutable tally, no I/O
// except through `Terminal`.
import type { WorkerEvent } from "./protocol.ts"
import type { Message } from "./workers.ts"

/** One run of a lock body, on the host's monotonic clock (µs); `leftAt` is unset while it runs. */
export interface Body {
  readonly deposit: number
  readonly enteredAt: number
  leftAt: number | undefined
}

export interface WorkerStats {
  readonly worker: number
  pid: number
  readonly bodies: Array<Body>
  acquisitions: number
  deposits: number
  readonly waits: Array<number>
  lost: number
  timedOut: number
  failures: number
  done: boolean
  killed: boolean
  exit: { readonly code: number | null; readonly signal: string | null } | undefined
}

/** The kill of a lock holder and the first acquisition that followed it. */
export interface KillRecord {
  readonly worker: number
  readonly deposit: number
  readonly at: number
  /** When the SIGKILL was sent, on the workers' monotonic clock (µs): the end of the victim's body. */
  readonly atMicros: number
  next: { readonly worker: number; readonly at: number; readonly waitMillis: number } | undefined
}

export interface Tally {
  startedAt: number
  readonly workers: ReadonlyMap<number, WorkerStats>
  /** The worker that holds the lock as far as its events tell. */
  holder: number | undefined
  /** Whether the slow mark was set (the next holder will be killed). */
  armed: boolean
  kill: KillRecord | undefined
}

export const makeTally = (workers: number, now: number): Tally => {
  const stats = new Map<number, WorkerStats>()
  for (let worker = 1; worker <= workers; worker++) {
    stats.set(worker, {
      worker,
      pid: -1,
      bodies: [],
      acquisitions: 0,
      deposits: 0,
      waits: [],
      lost: 0,
      timedOut: 0,
      failures: 0,
      done: false,
      killed: false,
      exit: undefined
    })
  }
  return { startedAt: now, workers: stats, holder: undefined, armed: false, kill: undefined }
}

const name = (worker: number): string => `w${worker}`
const ms = (millis: number): string => `${Math.round(millis)} ms`

const eventLine = (event: WorkerEvent): string | undefined => {
  switch (event._tag) {
    case "lost":
      return `${name(event.worker)} LOST the lock during ${event.phase} (${event.reason}), deposit ${event.deposit}`
    case "timedOut":
      return `${name(event.worker)} timed out after waiting ${ms(event.waitedMillis)}; it will retry`
    case "failed":
      return `${name(event.worker)} failed on deposit ${event.deposit}: ${event.error}: ${event.message}`
    default:
      return undefined
  }
}

/** Folds one message into the tally; returns the lines worth printing now. */
export const record = (tally: Tally, message: Message, now: number): ReadonlyArray<string> => {
  if (message._tag === "Output") return [`${name(message.worker)} | ${message.line}`]
  if (message._tag === "Exited") {
    const stats = tally.workers.get(message.worker)
    if (stats === undefined) return []
    stats.exit = { code: message.code, signal: message.signal }
    const how = message.signal === null ? `code ${message.code}` : message.signal
    return stats.done && message.code === 0 ? [] : [`${name(message.worker)} exited (${how})`]
  }
  const event = message.event
  const stats = tally.workers.get(event.worker)
  if (stats === undefined) return [`event from unknown worker ${event.worker}`]
  const lines: Array<string> = []
  switch (event._tag) {
    case "ready":
      stats.pid = event.pid
      break
    case "acquired": {
      stats.bodies.push({ deposit: event.deposit, enteredAt: event.enteredAt, leftAt: undefined })
      stats.acquisitions++
      stats.waits.push(event.waitMillis)
      tally.holder = event.worker
      const kill = tally.kill
      if (kill !== undefined && kill.next === undefined) {
        kill.next = { worker: event.worker, at: now, waitMillis: event.waitMillis }
        lines.push(
          `${name(event.worker)} acquired the lock ${ms(now - kill.at)} after the kill ` +
            `(it had waited ${ms(event.waitMillis)}): the dead holder's lease had to expire first`
        )
      }
      break
    }
    case "deposited":
      stats.deposits++
      break
    case "left": {
      const body = stats.bodies.at(-1)
      if (body !== undefined && body.deposit === event.deposit) body.leftAt = event.leftAt
      break
    }
    case "released":
    case "lost":
    case "failed":
      stats.lost += event._tag === "lost" ? 1 : 0
      stats.failures += event._tag === "failed" ? 1 : 0
      if (tally.holder === event.worker) tally.holder = undefined
      break
    case "timedOut":
      stats.timedOut++
      break
    case "done":
      stats.done = true
      break
  }
  const line = eventLine(event)
  if (line !== undefined) lines.push(line)
  return lines
}

/** Records that `worker` was killed while holding the lock for `deposit`. */
export const recordKill = (tally: Tally, worker: number, deposit: number, now: number, nowMicros: number): void => {
  const stats = tally.workers.get(worker)
  if (stats !== undefined) stats.killed = true
  tally.kill = { worker, deposit, at: now, atMicros: nowMicros, next: undefined }
}

export const completedDeposits = (tally: Tally): number =>
  [...tally.workers.values()].reduce((sum, stats) => sum + stats.deposits, 0)

/**
 * Whether to set the slow mark now. The next holder to take it is killed, so at least one other worker
 * must still have work then, to show the wait for the dead holder's lease. Arm at the midpoint while two
 * workers have two deposits left (one may finish its in-flight deposit before the mark is taken), or
 * earlier if waiting longer would lose that.
 */
export const shouldArm = (tally: Tally, depositsPerWorker: number): boolean => {
  if (tally.armed) return false
  const remaining = [...tally.workers.values()].map((stats) => depositsPerWorker - stats.deposits)
  const eligible = remaining.filter((left) => left >= 2).length
  if (eligible < 2) return false
  const lastChance = eligible === 2 && remaining.includes(2)
  return 2 * completedDeposits(tally) >= tally.workers.size * depositsPerWorker || lastChance
}

const holderText = (tally: Tally): string => {
  if (tally.holder === undefined) return "-"
  const stats = tally.workers.get(tally.holder)
  return stats?.killed === true ? `${name(tally.holder)} (killed; waiting for its lease to expire)` : name(tally.holder)
}

/** One line of progress: elapsed time, deposits per worker, the current holder. */
export const progressLine = (tally: Tally, now: number): string => {
  const perWorker = [...tally.workers.values()]
    .map((stats) => `${name(stats.worker)} ${String(stats.deposits).padStart(3)}${stats.killed ? " (killed)" : ""}`)
    .join("  ")
  const elapsed = `${((now - tally.startedAt) / 1000).toFixed(1)}s`.padStart(6)
  return `[${elapsed}] deposits ${String(completedDeposits(tally)).padStart(4)} | ${perWorker} | holder ${holderText(tally)}`
}

/** The p-th percentile (0..1) by nearest rank; NaN for no samples. */
export const percentile = (samples: ReadonlyArray<number>, p: number): number => {
  if (samples.length === 0) return Number.NaN
  const sorted = samples.toSorted((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN
}

/** Whether the lock bodies ran one at a time, judged from the workers' enter and leave timestamps. */
export interface Exclusion {
  /** Bodies with both ends known (the victim's ends at its SIGKILL). */
  readonly bodies: number
  /** How many bodies began before an earlier one had ended. */
  readonly overlaps: number
  /** The first overlap, described. */
  readonly example: string | undefined
  /** Bodies that never ended although their worker was not killed (it crashed inside); not checked. */
  readonly unfinished: number
}

/**
 * Sorts the bodies by entry and checks that each began after every earlier one had ended. A body's
 * timestamps are taken inside the lock (first and last thing), so under the lock the next entry comes
 * at least a release and an acquisition (round trips) after the previous exit.
 */
export const exclusion = (tally: Tally): Exclusion => {
  const intervals: Array<{ readonly worker: number; readonly deposit: number; start: number; end: number }> = []
  let unfinished = 0
  for (const stats of tally.workers.values()) {
    for (const body of stats.bodies) {
      const killedAt = tally.kill?.worker === stats.worker ? tally.kill.atMicros : undefined
      const end = body.leftAt ?? killedAt
      if (end === undefined) unfinished++
      else intervals.push({ worker: stats.worker, deposit: body.deposit, start: body.enteredAt, end })
    }
  }
  intervals.sort((a, b) => a.start - b.start)
  let overlaps = 0
  let example: string | undefined
  let latest: (typeof intervals)[number] | undefined
  for (const current of intervals) {
    if (latest !== undefined && current.start < latest.end) {
      overlaps++
      example ??=
        `${name(current.worker)} #${current.deposit} entered ${((latest.end - current.start) / 1000).toFixed(3)} ms ` +
        `before ${name(latest.worker)} #${latest.deposit} left`
    }
    if (latest === undefined || current.end > latest.end) latest = current
  }
  return { bodies: intervals.length, overlaps, example, unfinished }
}

/** What the run must show for the demo to pass. */
export interface Verdict {
  readonly expected: number
  readonly actual: number
  readonly exclusion: Exclusion
  readonly problems: ReadonlyArray<string>
}

/** Checks the balance, that no bodies overlapped, and the workers' fates; `problems` is empty when the run passes. */
export const verdict = (tally: Tally, actual: number, killPlanned: boolean): Verdict => {
  const expected = completedDeposits(tally)
  const problems: Array<string> = []
  if (actual !== expected) problems.push(`balance ${actual} != ${expected} completed deposits`)
  const bodies = exclusion(tally)
  if (bodies.overlaps > 0) {
    problems.push(`${bodies.overlaps} of ${bodies.bodies} bodies overlapped another (first: ${bodies.example})`)
  }
  for (const stats of tally.workers.values()) {
    if (stats.killed) continue
    if (stats.lost > 0) problems.push(`${name(stats.worker)} lost the lock ${stats.lost} time(s)`)
    if (stats.failures > 0 || !stats.done || stats.exit?.code !== 0) {
      problems.push(`${name(stats.worker)} did not finish cleanly`)
    }
  }
  if (killPlanned && tally.kill === undefined) problems.push("no worker was killed while holding the lock")
  if (tally.kill !== undefined && tally.kill.next === undefined) problems.push("no worker acquired after the kill")
  return { expected, actual, exclusion: bodies, problems }
}

const row = (cells: ReadonlyArray<string>): string =>
  cells.map((cell, i) => (i === 0 ? cell.padEnd(12) : cell.padStart(10))).join(" ")

const msCell = (millis: number): string => (Number.isNaN(millis) ? "-" : ms(millis))

/** The summary table and checks, as lines. */
export const summary = (tally: Tally, result: Verdict, leaseMillis: number): ReadonlyArray<string> => {
  const all = [...tally.workers.values()]
  const waits = all.flatMap((stats) => stats.waits)
  const lines: Array<string> = [
    "",
    "summary",
    row(["worker", "acquired", "deposited", "wait p50", "wait p99", "LockLost", "timeouts"]),
    ...all.map((stats) =>
      row([
        `${name(stats.worker)}${stats.killed ? " (killed)" : ""}`,
        String(stats.acquisitions),
        String(stats.deposits),
        msCell(percentile(stats.waits, 0.5)),
        msCell(percentile(stats.waits, 0.99)),
        String(stats.lost),
        String(stats.timedOut)
      ])
    ),
    row([
      "total",
      String(all.reduce((sum, stats) => sum + stats.acquisitions, 0)),
      String(result.expected),
      msCell(percentile(waits, 0.5)),
      msCell(percentile(waits, 0.99)),
      String(all.reduce((sum, stats) => sum + stats.lost, 0)),
      String(all.reduce((sum, stats) => sum + stats.timedOut, 0))
    ]),
    ""
  ]
  const kill = tally.kill
  if (kill === undefined) {
    lines.push("kill -> next acquire: n/a (no worker was killed)")
  } else {
    const gap = kill.next === undefined ? "never (no other worker acquired)" : ms(kill.next.at - kill.at)
    lines.push(`kill -> next acquire: ${gap} (lease ${ms(leaseMillis)})`)
    lines.push(
      `in-flight deposit lost with ${name(kill.worker)}: #${kill.deposit} (killed inside its body, before SET)`
    )
  }
  const { bodies, overlaps, unfinished } = result.exclusion
  const unchecked = unfinished === 0 ? "" : `; ${unfinished} never ended (crashed inside) and were not checked`
  lines.push(
    overlaps === 0
      ? `exclusion check: OK (${bodies} bodies, none began before another had left${unchecked})`
      : `exclusion check: OVERLAP (${overlaps} of ${bodies} bodies began before another had left${unchecked})`
  )
  lines.push(`balance: expected ${result.expected} (completed deposits), actual ${result.actual}`)
  for (const problem of result.problems) lines.push(`problem: ${problem}`)
  lines.push(`balance check: ${result.actual === result.expected ? "OK" : "MISMATCH"}`)
  return lines
}

/** Prints lines and the progress line; on a TTY the progress line is redrawn in place. */
export interface Terminal {
  readonly line: (text: string) => void
  readonly progress: (text: string) => void
}

export const makeTerminal = (stream: NodeJS.WriteStream): Terminal => {
  const tty = stream.isTTY === true
  let drawn = false
  const clear = (): void => {
    if (tty && drawn) stream.write("\r\x1b[K")
    drawn = false
  }
  return {
    line: (text) => {
      clear()
      stream.write(`${text}\n`)
    },
    progress: (text) => {
      if (!tty) return void stream.write(`${text}\n`)
      clear()
      const columns = stream.columns > 0 ? stream.columns : 120
      stream.write(text.slice(0, columns - 1))
      drawn = true
    }
  }
}
