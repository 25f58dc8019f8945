// Runs one soak scenario on one server flavor: a fresh standalone server from the test kit, the
// scenario's worker processes, the server sampled every few seconds from before the start until the
// workers have exited, then the keys the run left in its namespace. Judging the figures is verdict.ts's.
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Os from "node:os"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import { RedisServer, type ServerBinary } from "@sage/lock-testkit"
import { parseLine, type Sample, type WorkerParams, type WorkerResult } from "./protocol.ts"
import type { Plan, Scenario } from "./scenarios.ts"
import * as Server from "./server.ts"

const workerPath = fileURLToPath(new URL("./worker.ts", import.meta.url))
/** A worker that reported its result must have exited by itself within this: no handle left open. */
export const exitBoundMillis = 5000
/** Keys a lapsed registration leaves expire on their own: they may take a lease and this long. */
const keysGraceMillis = 4000

export interface WorkerRun {
  readonly worker: number
  readonly samples: ReadonlyArray<Sample>
  readonly result: WorkerResult | undefined
  /** Milliseconds from its result to its exit; undefined if it had to be killed. */
  readonly exitedAfterMillis: number | undefined
  readonly exit: string
  /** Lines it printed that are not protocol lines (warnings, errors), the first few. */
  readonly logs: ReadonlyArray<string>
  readonly fatal: string | undefined
}

export interface ScenarioRun {
  readonly scenario: Scenario
  readonly flavor: ServerBinary.Flavor
  readonly plan: Plan
  readonly namespace: string
  readonly workers: ReadonlyArray<WorkerRun>
  readonly server: ReadonlyArray<Server.ServerSample>
  /** The sampler's own admin sessions between the first and the last server sample. */
  readonly samplerSessions: number
  /** Keys of the namespace right after the workers exited, and once left ones had time to expire. */
  readonly keysAtExit: Server.KeysLeft
  readonly keysLeft: Server.KeysLeft
  readonly loadAverage: { readonly start: ReadonlyArray<number>; readonly end: ReadonlyArray<number> }
  readonly millis: number
  /** Harness failures: the server would not start, a worker not get ready. */
  readonly harness: ReadonlyArray<string>
}

interface Child {
  readonly worker: number
  readonly process: ChildProcess.ChildProcess
  readonly samples: Array<Sample>
  readonly logs: Array<string>
  ready: boolean
  result: WorkerResult | undefined
  resultAt: number | undefined
  fatal: string | undefined
  exit: { readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly at: number } | undefined
}

const spawn = (params: WorkerParams): Child => {
  const child: Child = {
    worker: params.worker,
    process: ChildProcess.spawn(
      process.execPath,
      ["--expose-gc", "--conditions=@sage/source", workerPath, JSON.stringify(params)],
      { stdio: ["pipe", "pipe", "pipe"] }
    ),
    samples: [],
    logs: [],
    ready: false,
    result: undefined,
    resultAt: undefined,
    fatal: undefined,
    exit: undefined
  }
  const log = (text: string): void => {
    if (child.logs.length < 10 && text.trim() !== "") child.logs.push(text.trim().slice(0, 300))
  }
  child.process.stdin?.on("error", () => {})
  Readline.createInterface({ input: child.process.stdout!, crlfDelay: Infinity }).on("line", (text) => {
    const line = parseLine(text)
    if (line === undefined) return log(text)
    if (line._tag === "starting") return
    if (line._tag === "ready") child.ready = true
    else if (line._tag === "sample") child.samples.push(line.sample)
    else if (line._tag === "fatal") child.fatal = line.message
    else {
      child.result = line.result
      child.resultAt = performance.now()
    }
  })
  Readline.createInterface({ input: child.process.stderr!, crlfDelay: Infinity }).on("line", log)
  child.process.once("close", (code, signal) => {
    child.exit = { code, signal, at: performance.now() }
  })
  return child
}

/** SIGTERM, then SIGKILL after 3 s; resolves once the process is gone. */
const stop = (child: Child): Promise<void> =>
  new Promise((resolve) => {
    const process = child.process
    if (child.exit !== undefined || process.exitCode !== null || process.signalCode !== null) return resolve()
    const escalate = setTimeout(() => process.kill("SIGKILL"), 3000)
    process.once("close", () => {
      clearTimeout(escalate)
      resolve()
    })
    process.kill("SIGTERM")
  })

const waitFor = (what: () => boolean, millis: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const deadline = performance.now() + millis
    while (!what()) {
      if (performance.now() > deadline) return false
      yield* Effect.sleep(50)
    }
    return true
  })

const describeExit = (child: Child): string =>
  child.exit === undefined
    ? "running"
    : child.exit.signal !== null
      ? `signal ${child.exit.signal}`
      : `code ${child.exit.code}`

/** Runs `scenario` under `plan` on a fresh `flavor` server. */
export const runScenario = (
  scenario: Scenario,
  flavor: ServerBinary.Flavor,
  plan: Plan,
  runId: string
): Effect.Effect<ScenarioRun> =>
  Effect.gen(function* () {
    const began = performance.now()
    const namespace = `soak-${runId}-${scenario.id}`
    const harness: Array<string> = []
    const server: Array<Server.ServerSample> = []
    let samplerSessions = 0
    let children: Array<Child> = []
    const loadStart = Os.loadavg()
    const empty: Server.KeysLeft = { others: [], fences: 0 }
    let keysAtExit = empty
    let keysLeft = empty
    yield* Effect.scoped(
      Effect.gen(function* () {
        const redis = yield* RedisServer.start({ flavor })
        children = yield* Effect.acquireRelease(
          Effect.sync(() =>
            Array.from({ length: scenario.workers }, (_, i) =>
              spawn({
                worker: i + 1,
                url: redis.url,
                namespace,
                leaseMillis: scenario.leaseMillis,
                load: scenario.load,
                durationMillis: plan.durationMillis,
                sampleMillis: plan.sampleMillis
              })
            )
          ),
          (all) => Effect.promise(() => Promise.all(all.map(stop)))
        )
        if (!(yield* waitFor(() => children.every((c) => c.ready || c.exit !== undefined), 60_000))) {
          harness.push("workers not ready within 60 s")
        }
        if (!children.every((c) => c.ready)) {
          for (const c of children) if (c.fatal !== undefined) harness.push(`worker ${c.worker}: ${c.fatal}`)
          return
        }
        const takeSample = (t: number) =>
          Effect.tap(Server.sample(redis, t), (s) =>
            Effect.sync(() => {
              samplerSessions++
              server.push(s)
            })
          )
        yield* takeSample(0)
        const startedAt = performance.now()
        for (const c of children) c.process.stdin?.write("start\n")
        // Sample until every worker exited (or was given up on): the last samples show connections closing.
        const allGone = () => children.every((c) => c.exit !== undefined)
        const bound =
          plan.durationMillis +
          scenario.leaseMillis * 2 +
          ("waitTimeoutMillis" in scenario.load ? scenario.load.waitTimeoutMillis : 0) +
          60_000
        while (!allGone() && performance.now() - startedAt < bound) {
          yield* waitFor(allGone, plan.sampleMillis)
          const sampled = yield* Effect.result(takeSample(Math.round(performance.now() - startedAt)))
          if (sampled._tag === "Failure") harness.push(`server sample failed: ${sampled.failure.message}`)
        }
        // A worker that reported may need a moment to exit; one that never exits keeps a handle open.
        yield* waitFor(() => children.every((c) => c.exit !== undefined || c.result === undefined), exitBoundMillis)
        keysAtExit = yield* Server.keysLeft(redis, namespace)
        const deadline = performance.now() + scenario.leaseMillis + keysGraceMillis
        keysLeft = keysAtExit
        while (keysLeft.others.length > 0 && performance.now() < deadline) {
          yield* Effect.sleep(250)
          keysLeft = yield* Server.keysLeft(redis, namespace)
        }
      })
    ).pipe(
      Effect.catch((error) => {
        harness.push(`server failed: ${error.message.split("\n")[0]}`)
        return Effect.void
      })
    )
    return {
      scenario,
      flavor,
      plan,
      namespace,
      workers: children.map((c): WorkerRun => ({
        worker: c.worker,
        samples: c.samples,
        result: c.result,
        exitedAfterMillis:
          c.exit !== undefined && c.resultAt !== undefined && c.exit.signal === null
            ? Math.round(c.exit.at - c.resultAt)
            : undefined,
        exit: describeExit(c),
        logs: c.logs,
        fatal: c.fatal
      })),
      server,
      samplerSessions,
      keysAtExit,
      keysLeft,
      loadAverage: { start: loadStart, end: Os.loadavg() },
      millis: Math.round(performance.now() - began),
      harness
    }
  })
