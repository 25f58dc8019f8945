// The worker processes of one cell as the parent runs them: spawning, the lines they write (kept for
// the checker), what each is doing now (for the scenarios to aim their faults), hand-offs as they
// happen, and stopping.
import * as ChildProcess from "node:child_process"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import { monotonicMicros, parseLine, type WorkerLine, type WorkerParams } from "./protocol.ts"
import type { HandOff, WorkerView } from "./scenario.ts"

const workerPath = fileURLToPath(new URL("./worker.ts", import.meta.url))

export interface Worker {
  readonly worker: number
  readonly child: ChildProcess.ChildProcess
  ready: boolean
  done: boolean
  closed: boolean
  killed: boolean
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined
  /** Calls whose body entered and has not left, with the body's planned length, key and entry. */
  readonly inBody: Map<string, { readonly bodyMillis: number; readonly key: string; readonly enteredAt: number }>
  /** Every call under way: its key, when it began, whether its body entered. */
  readonly calls: Map<string, { readonly key: string; readonly since: number; entered: boolean }>
}

interface HandOffWaiter {
  /** Only hand-offs after this (monotonic µs): not one that happened before anyone asked. */
  readonly after: number
  readonly withinMicros: number
  readonly sameWorker: boolean | undefined
  readonly resolve: (handOff: HandOff) => void
}

/**
 * Every worker of a cell, and the per-key record of recent body entries and exits from which
 * hand-offs are found. Lines of different processes reach the parent in any order, so a hand-off is
 * looked for both when an entry arrives and when an exit does.
 */
export class Workers {
  readonly all: Array<Worker> = []
  private readonly recent = new Map<string, Array<{ worker: number; call: string; t: number; kind: "E" | "L" }>>()
  private handOffWaiters: Array<HandOffWaiter> = []

  private readonly lines: Array<{ worker: number; line: WorkerLine }>
  private readonly unhandled: Array<string>
  private readonly logs: Array<string>
  private readonly redisKeyOf: (key: string) => string

  constructor(
    lines: Array<{ worker: number; line: WorkerLine }>,
    unhandled: Array<string>,
    logs: Array<string>,
    redisKeyOf: (key: string) => string
  ) {
    this.lines = lines
    this.unhandled = unhandled
    this.logs = logs
    this.redisKeyOf = redisKeyOf
  }

  spawn(params: WorkerParams): Worker {
    const log = (text: string): void => {
      // What keeps a closed worker alive is always kept, however much it logged before.
      if ((this.logs.length < 20 || text.startsWith("still alive")) && text.trim() !== "") {
        this.logs.push(`worker ${params.worker}: ${text.trim().slice(0, 300)}`)
      }
    }
    const child = ChildProcess.spawn(
      process.execPath,
      ["--conditions=@sage/source", workerPath, JSON.stringify(params)],
      { stdio: ["pipe", "pipe", "pipe"] }
    )
    child.stdin?.on("error", () => {})
    const worker: Worker = {
      worker: params.worker,
      child,
      ready: false,
      done: false,
      closed: false,
      killed: false,
      exit: undefined,
      inBody: new Map(),
      calls: new Map()
    }
    Readline.createInterface({ input: child.stdout!, crlfDelay: Infinity }).on("line", (text) => {
      const line = parseLine(text)
      if (line === undefined) return log(text)
      this.lines.push({ worker: params.worker, line })
      this.follow(worker, line)
    })
    Readline.createInterface({ input: child.stderr!, crlfDelay: Infinity }).on("line", log)
    child.once("close", (code, signal) => {
      worker.exit = { code, signal }
    })
    this.all.push(worker)
    return worker
  }

  private follow(worker: Worker, line: WorkerLine): void {
    switch (line[0]) {
      case "ready":
        worker.ready = true
        break
      case "done":
        worker.done = true
        break
      case "closed":
        worker.closed = true
        break
      case "fatal":
        this.unhandled.push(`worker ${worker.worker}: ${line[1]}`)
        break
      case "B":
        worker.calls.set(line[1], { key: line[2], since: line[3], entered: false })
        break
      case "E": {
        const call = worker.calls.get(line[1])
        if (call !== undefined) call.entered = true
        const key = call?.key ?? ""
        worker.inBody.set(line[1], { bodyMillis: line[3], key, enteredAt: line[2] })
        this.record(key, { worker: worker.worker, call: line[1], t: line[2], kind: "E" })
        break
      }
      case "L": {
        const key = worker.calls.get(line[1])?.key ?? ""
        worker.inBody.delete(line[1])
        this.record(key, { worker: worker.worker, call: line[1], t: line[2], kind: "L" })
        break
      }
      case "X":
        worker.calls.delete(line[1])
        break
    }
  }

  private record(key: string, event: { worker: number; call: string; t: number; kind: "E" | "L" }): void {
    const recent = this.recent.get(key) ?? []
    recent.push(event)
    if (recent.length > 16) recent.shift()
    this.recent.set(key, recent)
    if (this.handOffWaiters.length === 0) return
    // The newest entry on the key that came after the newest exit before it.
    const entries = recent.filter((e) => e.kind === "E")
    for (const entry of entries.toReversed()) {
      const exit = recent
        .filter((e) => e.kind === "L" && e.t <= entry.t && e.call !== entry.call)
        .reduce<(typeof recent)[number] | undefined>(
          (latest, e) => (latest === undefined || e.t > latest.t ? e : latest),
          undefined
        )
      if (exit === undefined) continue
      for (const waiter of this.handOffWaiters) {
        if (entry.t < waiter.after || entry.t - exit.t > waiter.withinMicros) continue
        if (waiter.sameWorker !== undefined && waiter.sameWorker !== (entry.worker === exit.worker)) continue
        // Only a body still inside: the fault aims at a holder.
        if (!this.all.some((w) => w.worker === entry.worker && w.inBody.has(entry.call) && !w.killed)) continue
        this.handOffWaiters = this.handOffWaiters.filter((other) => other !== waiter)
        waiter.resolve({
          worker: entry.worker,
          call: entry.call,
          redisKey: this.redisKeyOf(key),
          enteredAt: entry.t,
          fromWorker: exit.worker,
          gapMillis: (entry.t - exit.t) / 1000
        })
      }
      break
    }
  }

  /** Resolves with the next hand-off that matches (see `FaultContext.nextHandOff`). */
  nextHandOff(options: { readonly withinMillis: number; readonly sameWorker?: boolean | undefined }): Promise<HandOff> {
    return new Promise((resolve) =>
      this.handOffWaiters.push({
        after: monotonicMicros(),
        withinMicros: options.withinMillis * 1000,
        sameWorker: options.sameWorker,
        resolve
      })
    )
  }

  views(): Array<WorkerView> {
    return this.all.map((w) => ({
      worker: w.worker,
      alive: !w.killed && w.exit === undefined,
      waiting: [...w.calls]
        .filter(([, call]) => !call.entered)
        .map(([call, { key, since }]) => ({ call, redisKey: this.redisKeyOf(key), since })),
      inBody: [...w.inBody].map(([call, body]) => ({
        call,
        redisKey: this.redisKeyOf(body.key),
        enteredAt: body.enteredAt,
        bodyMillis: body.bodyMillis
      }))
    }))
  }
}

export const stopWorker = (worker: Worker): Promise<void> =>
  new Promise((resolve) => {
    const child = worker.child
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const escalate = setTimeout(() => child.kill("SIGKILL"), 3000)
    child.once("close", () => {
      clearTimeout(escalate)
      resolve()
    })
    child.kill("SIGCONT")
    child.kill("SIGTERM")
  })
