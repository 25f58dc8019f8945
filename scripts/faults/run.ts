// Runs one cell of the fault matrix: a fresh deployment, worker processes contending on a few keys
// (locks, a semaphore cell's semaphores, or an election cell's elections, with observers),
// the scenario's fault in the middle of the run, a final read of the servers once every lease and
// waiter registration could have lapsed, then the checker's counts and the verdict (verdict.ts).
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ServerBinary } from "@sage/lock-testkit"
import { type Counts, check, type WorkerFault } from "./checker.ts"
import * as Deployments from "./deployments.ts"
import { monotonicMicros, type WorkerLine } from "./protocol.ts"
import type { FaultContext, Scenario } from "./scenario.ts"
import {
  clockOffset,
  type Leftovers,
  leftovers as readLeftovers,
  registrationLifetimeMillis,
  strandedWaiters,
  widen,
  clockStepMillis
} from "./serverState.ts"
import { problemsOf, steppedClock } from "./verdict.ts"
import { stopWorker, Workers } from "./workers.ts"

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
  /** A semaphore cell's limit per key. */
  readonly semaphoreLimit: number
  /**
   * The share of a semaphore cell's calls that ask for 2 permits (the others ask for 1): requests of
   * two sizes make the line's order matter.
   */
  readonly doublePermitsShare: number
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
  recoveryMillis: 4000,
  semaphoreLimit: 3,
  doublePermitsShare: 0.25
}

/** The settings of the CI subset (scripts/faults/test): shorter phases, the same lease. */
export const fastSettings: Settings = { ...defaultSettings, warmupMillis: 800, recoveryMillis: 4000 }

export interface CellResult {
  readonly scenario: Scenario
  readonly deployment: Deployments.DeploymentKind
  readonly flavor: ServerBinary.Flavor
  readonly counts: Counts | undefined
  /**
   * Keys of the namespace (other than fence keys, elections' leader records and waiter queues) still
   * there once every lease had lapsed: lock keys, a semaphore's holders, `:permits` and `:asks`.
   */
  readonly keysLeft: ReadonlyArray<string>
  /** Waiters still registered once every registration had lapsed (distinct waiter ids per lock or semaphore). */
  readonly strandedRegistrations: number
  /** Figures the scenario's injection recorded (`FaultContext.note`). */
  readonly notes: ReadonlyArray<string>
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

const namespace = "faults"
const redisKeyOf = (key: string): string => `${namespace}:{${key}}`
/** How long a worker may take to close its lock layer (connections) and exit after its last call. */
const closeBoundMillis = Number(process.env["FAULTS_CLOSE_BOUND"] ?? 5000)

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
    const notes: Array<string> = []
    const scenarioProblems: Array<string> = []
    const workerFaults: Array<WorkerFault> = []
    const keys = Array.from({ length: settings.keys }, (_, i) => `k${i}`)
    const redisKeys = keys.map(redisKeyOf)
    const workerCount = scenario.workers ?? settings.workers
    const outcome = yield* Effect.scoped(
      Effect.gen(function* () {
        // Starting six cluster nodes on a loaded 2-core machine sometimes misses a 1 s admin-command
        // timeout: that is the harness, not the lock, so a failed start is retried (twice) before it counts.
        const deployment = yield* Deployments.start(kind, flavor, scenario.deploymentOptions).pipe(
          Effect.retry({ times: 2 })
        )
        const offsetBefore = yield* clockOffset(deployment)
        const pool = new Workers(lines, unhandled, logs, redisKeyOf)
        const workers = yield* Effect.acquireRelease(
          Effect.sync(() =>
            Array.from({ length: workerCount }, (_, i) =>
              pool.spawn({
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
                ...(scenario.semaphore === true
                  ? { semaphore: { limit: settings.semaphoreLimit, doubleShare: settings.doublePermitsShare } }
                  : {}),
                ...(scenario.election === true ? { election: true } : {}),
                ...(deployment.auth === undefined ? {} : { auth: deployment.auth })
              })
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
              if (w === undefined || w.killed) return
              w.child.kill("SIGKILL")
              w.killed = true
              workerFaults.push({ worker: n, from: monotonicMicros(), to: Infinity })
            }),
          holderWorker: (minBodyMillis = 0) =>
            Effect.gen(function* () {
              for (;;) {
                for (const w of workers) {
                  if (w.exit !== undefined || w.killed) continue
                  const body = [...w.inBody.values()].find((candidate) => candidate.bodyMillis >= minBodyMillis)
                  if (body !== undefined) return { worker: w.worker, redisKey: redisKeyOf(body.key) }
                }
                yield* Effect.sleep(5)
              }
            }),
          workers: Effect.sync(() => pool.views()),
          nextHandOff: (options) => Effect.promise(() => pool.nextHandOff(options)),
          fail: (problem) => Effect.sync(() => void scenarioProblems.push(problem)),
          note: (text) => Effect.sync(() => void notes.push(text))
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
          if (!w.done && !w.killed) unhandled.push(`worker ${w.worker} did not finish within ${bound} ms of "stop"`)
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
          if (!w.killed && w.done && w.exit !== undefined && w.exit.code !== 0) {
            unhandled.push(`worker ${w.worker} exited with ${w.exit?.code ?? w.exit?.signal}`)
          }
        }
        // Every worker is gone: whatever a lease or a registration left must lapse within its lifetime
        // (a kill or a fault may have left both just renewed or refreshed), plus a second for expiry.
        const lapse = Math.max(settings.leaseMillis, registrationLifetimeMillis(settings.leaseMillis)) + 1000
        const reading = Date.now()
        const keyKind = scenario.semaphore === true ? "semaphore" : scenario.election === true ? "election" : "lock"
        const left = yield* readLeftovers(deployment, namespace, redisKeys, lapse, keyKind)
        if (process.env["FAULTS_DEBUG"] === "1") console.log(`the final read took ${Date.now() - reading} ms`)
        const offsetAfter = yield* clockOffset(deployment)
        const offset = widen(offsetBefore, offsetAfter)
        const clockStep = clockStepMillis(offsetBefore, offsetAfter)
        if (clockStep !== undefined && steppedClock(clockStep)) {
          notes.push(
            `the servers' clock moved ${Math.round(clockStep)} ms against the host's monotonic clock during the run ` +
              "(the host's clock was stepped): a forward step cuts every lease on the server short, so overlaps " +
              "that surfaced as LockLost do not count against exclusion in this cell (docs/semantics.md, Limits)"
          )
        }
        const dump = process.env["FAULTS_LINES"]
        if (dump !== undefined && dump !== "") {
          // Every line of the cell, for reading a failure by hand: one JSON file per cell in that directory.
          const file = Path.join(dump, `${scenario.id}-${kind}-${flavor}.json`)
          Fs.mkdirSync(dump, { recursive: true })
          Fs.writeFileSync(file, JSON.stringify({ workerFaults, healedAt, faultStartedAt, lines }))
        }
        const counts = check({
          lines,
          waitTimeoutMillis: settings.waitTimeoutMillis,
          workerFaults,
          healedAt,
          endedAt: Math.max(endedAt, stoppedAt),
          expectedErrorCodes: scenario.expectedErrorCodes ?? [],
          leaseMillis: settings.leaseMillis,
          clockOffset: offset,
          election: scenario.election === true
        })
        return { counts, left, faultStartedAt, healedAt, clockStep }
      })
    ).pipe(
      Effect.catch((error) => {
        unhandled.push(`setup failed: ${error.message.split("\n")[0]}`)
        return Effect.succeed(undefined)
      })
    )
    const counts = outcome?.counts
    const left: Leftovers | undefined = outcome?.left
    const problems: Array<string> = [...unhandled, ...scenarioProblems]
    if (outcome !== undefined) {
      problems.push(
        ...problemsOf({
          scenario,
          counts: outcome.counts,
          leftovers: left,
          leaseMillis: settings.leaseMillis,
          faultStartedAt: outcome.faultStartedAt,
          healedAt: outcome.healedAt,
          clockStepMillis: outcome.clockStep
        })
      )
    } else if (problems.length === 0) {
      problems.push("no counts")
    }
    return {
      harnessFailure: unhandled.some(
        (line) => line.startsWith("setup failed") || line.startsWith("fault injection failed")
      ),
      scenario,
      deployment: kind,
      flavor,
      counts,
      keysLeft: left?.keys ?? [],
      strandedRegistrations: left === undefined ? 0 : strandedWaiters(left),
      notes,
      unhandled,
      pass: problems.length === 0,
      problems,
      logs,
      millis: Date.now() - startedAt
    }
  })
