// The worker processes of the peers bench and one measured run over some of them. Processes are
// started on first use and reused for every later run of their library, so starting Node is paid once.
// A run sends each process its job, waits until all are warm, reads the server's command counters,
// opens a common window, collects the results and reads the counters again (so connects and warm-up
// fall outside; the server's CPU time over that span is the library's commands' and the bench's two INFOs'). Every wait has a deadline; `stopAll` ends every process, by SIGKILL if it must.
import * as ChildProcess from "node:child_process"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Affinity from "./affinity.ts"
import { clockMillis } from "./clock.ts"
import type { Snapshot } from "./counters.ts"
import { type Command, decodeMessage, type Job, type Message, type Result, WorkerArgsJson } from "./protocol.ts"

const workerPath = fileURLToPath(new URL("./worker.ts", import.meta.url))

/** Time to start, connect and warm up; and to close once stdin ends. */
const readyTimeoutMillis = 60_000
const exitTimeoutMillis = 12_000
/** The window opens this long after the go is sent, so every process starts its loops at once. */
const leadMillis = 100

interface Worker {
  readonly library: string
  readonly child: ChildProcess.ChildProcess
  readonly send: (command: Command) => void
  /** The next message; a `failed` one (or the process's exit) rejects. */
  readonly next: () => Promise<Message>
  readonly exited: Promise<void>
}

const withTimeout = <A>(promise: Promise<A>, millis: number, what: string): Promise<A> => {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${millis} ms`)), millis)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

const launch = (library: string, url: string, drivers: string | undefined): Worker => {
  const child = ChildProcess.spawn(
    process.execPath,
    // --expose-gc: the held workloads collect the heap before their window (drivers.ts `collectGarbage`).
    [...process.execArgv, "--expose-gc", workerPath, Schema.encodeSync(WorkerArgsJson)({ library, url, drivers })],
    { stdio: ["pipe", "pipe", "inherit"] }
  )
  child.stdin?.on("error", () => {})
  const queued: Array<Message> = []
  const waiting: Array<(message: Message) => void> = []
  const deliver = (message: Message): void => {
    const waiter = waiting.shift()
    if (waiter === undefined) queued.push(message)
    else waiter(message)
  }
  let ended: Message | undefined
  if (child.stdout !== null) {
    Readline.createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
      Option.match(decodeMessage(line), {
        onNone: () => process.stderr.write(`[${library} worker] ${line}\n`),
        onSome: deliver
      })
    })
  }
  const exited = new Promise<void>((resolve) => {
    const end = (why: string) => {
      ended = { _tag: "failed", message: `${library} worker ${why}` }
      for (const waiter of waiting.splice(0)) waiter(ended)
      resolve()
    }
    // "close" comes after stdout is drained, so every message is delivered first.
    child.once("close", (code, signal) => end(`exited (code ${code}, signal ${signal})`))
    child.once("error", (error) => end(`could not start: ${error.message}`))
  })
  const next = async (): Promise<Message> => {
    const message =
      queued.shift() ?? ended ?? (await new Promise<Message>((resolve) => waiting.push((m) => resolve(m))))
    if (message._tag === "failed") throw new Error(`${library} worker failed: ${message.message}`)
    return message
  }
  return {
    library,
    child,
    send: (command) => child.stdin?.write(`${JSON.stringify(command)}\n`),
    next,
    exited
  }
}

const expect = async <T extends Message["_tag"]>(
  worker: Worker,
  tag: T
): Promise<Extract<Message, { readonly _tag: T }>> => {
  const message = await worker.next()
  if (message._tag !== tag) throw new Error(`${worker.library} worker said ${message._tag}, expected ${tag}`)
  return message as Extract<Message, { readonly _tag: T }>
}

export interface Measured {
  readonly results: ReadonlyArray<Result>
  /** Command calls during the window, by command name, from the server's counters. */
  readonly calls: ReadonlyMap<string, number>
  /** The server's CPU time between the two readings of its counters, microseconds. */
  readonly serverCpuMicros: number
  readonly from: number
  readonly until: number
}

export interface Processes {
  /**
   * Runs `jobs[i]` on process i of `library` (starting processes as needed), all in one window of
   * `durationMillis`; results may take `resultTimeoutMillis` after the window (held locks run past it).
   * With `oneCpu`, the processes and the server run on the first CPU from before the warm-up until
   * the results are in, then on all again; `undefined` when they could not be pinned (nothing ran).
   */
  readonly measure: (
    library: string,
    jobs: ReadonlyArray<Job>,
    options: { readonly durationMillis: number; readonly resultTimeoutMillis: number; readonly oneCpu: boolean }
  ) => Promise<Measured | undefined>
  /** Ends every process: stdin closes, and SIGKILL follows for any still running after a grace period. */
  readonly stopAll: () => Promise<void>
}

/**
 * The processes of one run. `drivers` (a module URL, see protocol.ts `WorkerArgs`) makes the workers
 * load their library from that module instead of the peers'.
 */
export const make = (
  url: string,
  counters: () => Promise<Snapshot>,
  serverPid: () => number,
  drivers?: string
): Processes => {
  const pools = new Map<string, Array<Worker>>()
  const workersOf = (library: string, count: number): Array<Worker> => {
    const pool = pools.get(library) ?? []
    pools.set(library, pool)
    while (pool.length < count) pool.push(launch(library, url, drivers))
    return pool.slice(0, count)
  }

  // One measured run over processes already on the CPUs they should use.
  const measureOn = async (
    library: string,
    workers: ReadonlyArray<Worker>,
    jobs: ReadonlyArray<Job>,
    options: { readonly durationMillis: number; readonly resultTimeoutMillis: number }
  ): Promise<Measured> => {
    workers.forEach((worker, i) => worker.send({ _tag: "prepare", job: jobs[i]! }))
    await withTimeout(
      Promise.all(workers.map((worker) => expect(worker, "ready"))),
      readyTimeoutMillis,
      `${library} workers ready`
    )
    const before = await counters()
    const from = clockMillis() + leadMillis
    const until = from + options.durationMillis
    for (const worker of workers) worker.send({ _tag: "start", from, until })
    const messages = await withTimeout(
      Promise.all(workers.map((worker) => expect(worker, "result"))),
      leadMillis + options.durationMillis + options.resultTimeoutMillis,
      `${library} results`
    )
    const after = await counters()
    const calls = new Map<string, number>()
    for (const [command, count] of after.calls) calls.set(command, count - (before.calls.get(command) ?? 0))
    return {
      results: messages.map((message) => message.result),
      calls,
      serverCpuMicros: after.cpuMicros - before.cpuMicros,
      from,
      until
    }
  }

  const measure: Processes["measure"] = async (library, jobs, options) => {
    const workers = workersOf(library, jobs.length)
    if (!options.oneCpu) return measureOn(library, workers, jobs, options)
    const pids = [serverPid(), ...workers.map((worker) => worker.child.pid ?? -1)]
    try {
      return Affinity.setCpus(pids, "0") ? await measureOn(library, workers, jobs, options) : undefined
    } finally {
      Affinity.setCpus(pids, Affinity.allCpus())
    }
  }

  const stopAll = async (): Promise<void> => {
    const all = [...pools.values()].flat()
    for (const worker of all) worker.child.stdin?.end()
    const exited = Promise.all(all.map((worker) => worker.exited))
    await withTimeout(exited, exitTimeoutMillis, "workers exit").catch(() => {
      for (const worker of all) {
        if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGKILL")
      }
      return exited
    })
  }

  return { measure, stopAll }
}
