// Runs one cell of the fault matrix: a fresh deployment, worker processes contending on a few keys,
// the scenario's fault in the middle of the run, then the checker's counts and the verdict.
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import type { ServerBinary } from "@sage/lock-testkit"
import { type Counts, check, describeOverlap, type WorkerFault } from "./checker.ts"
import * as Deployments from "./deployments.ts"
import { monotonicMicros, parseLine, type WorkerLine, type WorkerParams } from "./protocol.ts"
import type { FaultContext, Scenario } from "./scenarios.ts"

export interface Settings {
  readonly workers: number
  readonly fibers: number
  readonly keys: number
  readonly leaseMillis: number
  readonly waitTimeoutMillis: number
  readonly bodyMinMillis: number
  readonly bodyMaxMillis: number
  /** A share of bodies that run `longBodyMillis` instead, long enough to need renewals. */
  readonly longBodyShare: number
  readonly longBodyMillis: number
  /** Contention before the fault. */
  readonly warmupMillis: number
  /** Contention after the fault healed: long enough for lost leases to lapse and the queue to move. */
  readonly recoveryMillis: number
}

export const defaultSettings: Settings = {
  workers: 2,
  fibers: 4,
  keys: 2,
  leaseMillis: 3000,
  waitTimeoutMillis: 4000,
  bodyMinMillis: 30,
  bodyMaxMillis: 150,
  longBodyShare: 0.05,
  longBodyMillis: 4000,
  warmupMillis: 1000,
  recoveryMillis: 4000
}

/** The settings of the CI subset (scripts/faults/test): shorter phases, the same lease. */
export const fastSettings: Settings = { ...defaultSettings, warmupMillis: 800, recoveryMillis: 4000 }

export interface CellResult {
  readonly scenario: Scenario
  readonly deployment: Deployments.DeploymentKind
  readonly flavor: ServerBinary.Flavor
  readonly counts: Counts | undefined
  readonly keysLeft: ReadonlyArray<string>
  /** Worker crashes, fatal layer errors, fault-injection failures. */
  readonly unhandled: ReadonlyArray<string>
  readonly pass: boolean
  /** Why it failed, one line each. */
  readonly problems: ReadonlyArray<string>
  /** The harness, not the lock, failed: the deployment did not start or the fault could not be injected. */
  readonly harnessFailure: boolean
  /** The first lines the workers logged (library warnings, not protocol lines), for diagnosis. */
  readonly logs: ReadonlyArray<string>
  readonly millis: number
}

const workerPath = fileURLToPath(new URL("./worker.ts", import.meta.url))
const namespace = "faults"
/** How long a worker may take to close its lock layer (connections) and exit after its last call. */
const closeBoundMillis = Number(process.env["FAULTS_CLOSE_BOUND"] ?? 5000)

interface Worker {
  readonly worker: number
  readonly child: ChildProcess.ChildProcess
  ready: boolean
  done: boolean
  closed: boolean
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined
  /** Calls whose body entered and has not left, with the body's planned length and key. */
  readonly inBody: Map<string, { readonly bodyMillis: number; readonly key: string }>
  /** The key of every call under way. */
  readonly keyOf: Map<string, string>
}

const spawnWorker = (
  params: WorkerParams,
  lines: Array<{ worker: number; line: WorkerLine }>,
  unhandled: Array<string>,
  logs: Array<string>
): Worker => {
  const log = (text: string): void => {
    // What keeps a closed worker alive is always kept, however much it logged before.
    if ((logs.length < 20 || text.startsWith("still alive")) && text.trim() !== "") {
      logs.push(`worker ${params.worker}: ${text.trim().slice(0, 300)}`)
    }
  }
  const child = ChildProcess.spawn(
    process.execPath,
    ["--conditions=@sage/source", workerPath, JSON.stringify(params)],
    {
      stdio: ["pipe", "pipe", "pipe"]
    }
  )
  child.stdin?.on("error", () => {})
  const worker: Worker = {
    worker: params.worker,
    child,
    ready: false,
    done: false,
    closed: false,
    exit: undefined,
    inBody: new Map(),
    keyOf: new Map()
  }
  Readline.createInterface({ input: child.stdout!, crlfDelay: Infinity }).on("line", (text) => {
    const line = parseLine(text)
    if (line === undefined) return log(text)
    lines.push({ worker: params.worker, line })
    if (line[0] === "ready") worker.ready = true
    else if (line[0] === "done") worker.done = true
    else if (line[0] === "closed") worker.closed = true
    else if (line[0] === "fatal") unhandled.push(`worker ${params.worker}: ${line[1]}`)
    else if (line[0] === "B") worker.keyOf.set(line[1], line[2])
    else if (line[0] === "E") worker.inBody.set(line[1], { bodyMillis: line[3], key: worker.keyOf.get(line[1]) ?? "" })
    else if (line[0] === "L") worker.inBody.delete(line[1])
    else if (line[0] === "X") worker.keyOf.delete(line[1])
  })
  Readline.createInterface({ input: child.stderr!, crlfDelay: Infinity }).on("line", log)
  child.once("close", (code, signal) => {
    worker.exit = { code, signal }
  })
  return worker
}

const stopWorker = (worker: Worker): Promise<void> =>
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

const waitFor = (what: () => boolean, timeoutMillis: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMillis
    while (!what()) {
      if (Date.now() > deadline) return false
      yield* Effect.sleep(20)
    }
    return true
  })

/** Runs one scenario on one deployment and server flavor. */
export const runCell = (
  scenario: Scenario,
  kind: Deployments.DeploymentKind,
  flavor: ServerBinary.Flavor,
  settings: Settings = defaultSettings
): Effect.Effect<CellResult> =>
  Effect.gen(function* () {
    const startedAt = Date.now()
    const lines: Array<{ worker: number; line: WorkerLine }> = []
    const unhandled: Array<string> = []
    const logs: Array<string> = []
    const workerFaults: Array<WorkerFault> = []
    const keys = Array.from({ length: settings.keys }, (_, i) => `k${i}`)
    const redisKeys = keys.map((key) => `${namespace}:{${key}}`)
    const outcome = yield* Effect.scoped(
      Effect.gen(function* () {
        // Starting six cluster nodes on a loaded 2-core machine sometimes misses a 1 s admin-command
        // timeout: that is the harness, not the lock, so a failed start is retried (twice) before it counts.
        const deployment = yield* Deployments.start(kind, flavor, scenario.deploymentOptions).pipe(
          Effect.retry({ times: 2 })
        )
        const workers = yield* Effect.acquireRelease(
          Effect.sync(() =>
            Array.from({ length: settings.workers }, (_, i) =>
              spawnWorker(
                {
                  worker: i + 1,
                  connection: deployment.connectionFor(i + 1),
                  namespace,
                  keys,
                  fibers: settings.fibers,
                  leaseMillis: settings.leaseMillis,
                  waitTimeoutMillis: settings.waitTimeoutMillis,
                  bodyMinMillis: settings.bodyMinMillis,
                  bodyMaxMillis: settings.bodyMaxMillis,
                  longBodyShare: settings.longBodyShare,
                  longBodyMillis: settings.longBodyMillis,
                  replicaAcknowledgement: true,
                  ...(deployment.auth === undefined ? {} : { auth: deployment.auth })
                },
                lines,
                unhandled,
                logs
              )
            )
          ),
          (workers) => Effect.promise(() => Promise.all(workers.map(stopWorker)))
        )
        if (!(yield* waitFor(() => workers.every((w) => w.ready || w.exit !== undefined), 30_000))) {
          unhandled.push("workers not ready within 30 s")
        }
        if (!workers.every((w) => w.ready)) return undefined
        for (const w of workers) w.child.stdin?.write("start\n")
        yield* Effect.sleep(settings.warmupMillis)

        const context: FaultContext = {
          deployment,
          leaseMillis: settings.leaseMillis,
          longBodyMillis: settings.longBodyMillis,
          redisKeys,
          pauseWorker: (n, millis) =>
            Effect.gen(function* () {
              const w = workers[n - 1]
              if (w === undefined) return
              const from = monotonicMicros()
              w.child.kill("SIGSTOP")
              yield* Effect.sleep(millis).pipe(Effect.ensuring(Effect.sync(() => w.child.kill("SIGCONT"))))
              workerFaults.push({ worker: n, from, to: monotonicMicros() })
            }),
          killWorker: (n) =>
            Effect.sync(() => {
              const w = workers[n - 1]
              if (w === undefined) return
              w.child.kill("SIGKILL")
              workerFaults.push({ worker: n, from: monotonicMicros(), to: Infinity })
            }),
          holderWorker: (minBodyMillis = 0) =>
            Effect.gen(function* () {
              for (;;) {
                for (const w of workers) {
                  if (w.exit !== undefined) continue
                  const body = [...w.inBody.values()].find((candidate) => candidate.bodyMillis >= minBodyMillis)
                  if (body !== undefined) return { worker: w.worker, redisKey: `${namespace}:{${body.key}}` }
                }
                yield* Effect.sleep(5)
              }
            })
        }
        const faultStartedAt = monotonicMicros()
        const injected = yield* Effect.result(
          Effect.scoped(scenario.inject(context)).pipe(Effect.timeout("90 seconds"))
        )
        if (injected._tag === "Failure") unhandled.push(`fault injection failed: ${String(injected.failure)}`)
        const healedAt = monotonicMicros()
        yield* Effect.sleep(settings.recoveryMillis)
        const stoppedAt = monotonicMicros()
        for (const w of workers) w.child.stdin?.write("stop\n")
        const bound = settings.waitTimeoutMillis + settings.longBodyMillis + 4000
        yield* waitFor(() => workers.every((w) => w.done || w.exit !== undefined), bound)
        const endedAt = monotonicMicros()
        for (const w of workers) {
          const killed = workerFaults.some((f) => f.worker === w.worker && f.to === Infinity)
          if (!w.done && !killed) unhandled.push(`worker ${w.worker} did not finish within ${bound} ms of "stop"`)
        }
        // A worker that reported "done" closes its lock layer and exits by itself; closing must be bounded.
        const closing = Date.now()
        yield* waitFor(() => workers.every((w) => !w.done || w.exit !== undefined), closeBoundMillis)
        for (const w of workers) {
          if (w.done && w.exit === undefined) {
            unhandled.push(
              w.closed
                ? `worker ${w.worker} closed its lock layer but did not exit within ${closeBoundMillis} ms (a handle left open)` +
                    (logs
                      .find((line) => line.startsWith(`worker ${w.worker}: still alive`))
                      ?.replace(`worker ${w.worker}: `, ": ") ?? "")
                : `worker ${w.worker} did not close its lock layer within ${closeBoundMillis} ms of its last call`
            )
          }
        }
        if (process.env["FAULTS_DEBUG"] === "1") console.log(`closing took ${Date.now() - closing} ms`)
        yield* Effect.promise(() => Promise.all(workers.map(stopWorker)))
        for (const w of workers) {
          const killed = workerFaults.some((f) => f.worker === w.worker && f.to === Infinity)
          if (!killed && w.done && w.exit !== undefined && w.exit.code !== 0) {
            unhandled.push(`worker ${w.worker} exited with ${w.exit?.code ?? w.exit?.signal}`)
          }
        }
        // Keys left behind: whatever a lapsed lease or registration leaves must expire on its own.
        let left: Array<string> = []
        const leftDeadline = Date.now() + settings.leaseMillis + 4000
        for (;;) {
          const found = yield* Effect.result(Deployments.keysLeft(deployment, namespace, redisKeys))
          left = found._tag === "Success" ? found.success : [`(cannot list: ${found.failure.message})`]
          if (left.length === 0 || Date.now() > leftDeadline) break
          yield* Effect.sleep(250)
        }
        const counts = check({
          lines,
          waitTimeoutMillis: settings.waitTimeoutMillis,
          workerFaults,
          healedAt,
          endedAt: Math.max(endedAt, stoppedAt),
          expectedErrorCodes: scenario.expectedErrorCodes ?? []
        })
        return { counts, left, faultStartedAt, healedAt }
      })
    ).pipe(
      Effect.catch((error) => {
        unhandled.push(`setup failed: ${error.message.split("\n")[0]}`)
        return Effect.succeed(undefined)
      })
    )
    const counts = outcome?.counts
    const keysLeft = outcome?.left ?? []
    const problems: Array<string> = [...unhandled]
    if (counts !== undefined) {
      const lost = counts.lockLost.acquire + counts.lockLost.renew + counts.lockLost.release
      const window = `fault injected at ${((outcome?.faultStartedAt ?? 0) / 1000).toFixed(1)}, healed at ${(
        (outcome?.healedAt ?? 0) / 1000
      ).toFixed(1)} (ms, monotonic)`
      const failing = scenario.expect === "exclusion" ? counts.overlaps : counts.overlaps.filter((o) => !o.surfaced)
      if (failing.length > 0) problems.push(window)
      if (scenario.expect === "exclusion") {
        for (const overlap of counts.overlaps)
          problems.push(`overlap where exclusion is promised: ${describeOverlap(overlap)}`)
      } else {
        for (const overlap of counts.overlaps.filter((o) => !o.surfaced))
          problems.push(`silent overlap: ${describeOverlap(overlap)}`)
      }
      if (scenario.lockLostRequired === true && lost === 0)
        problems.push("no LockLost surfaced: the fault must take a held lock away in this scenario")
      for (const hang of counts.hangs) problems.push(`hang: ${hang}`)
      for (const error of counts.unexpectedErrors) problems.push(`unexpected error: ${error}`)
      if (counts.acquisitionsAfterHeal === 0) {
        const how = Object.entries(counts.failedAfterHeal)
          .toSorted((a, b) => b[1] - a[1])
          .slice(0, 5)
          .map(([outcome, n]) => `${n} x ${outcome}`)
        problems.push(
          `no acquisition after the fault ended${how.length === 0 ? "" : `; calls ended after it: ${how.join("; ")}`}`
        )
      }
    } else if (problems.length === 0) {
      problems.push("no counts")
    }
    for (const key of keysLeft) problems.push(`key left behind: ${key}`)
    return {
      harnessFailure: unhandled.some(
        (line) => line.startsWith("setup failed") || line.startsWith("fault injection failed")
      ),
      scenario,
      deployment: kind,
      flavor,
      counts,
      keysLeft,
      unhandled,
      pass: problems.length === 0,
      problems,
      logs,
      millis: Date.now() - startedAt
    }
  })
