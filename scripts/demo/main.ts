// The @sage/lock demo: worker processes deposit into one Redis balance with a non-atomic GET/SET under
// `withLock`; midway one worker is SIGKILLed while it holds the lock, and the others wait for its lease.
// Prints live progress and a summary; exits 0 only when the balance equals the completed deposits, no two
// lock bodies overlapped and no surviving worker lost the lock. Runs on one server, a Cluster or Sentinel
// (`--topology`). Run `npm run demo` at the repo root, or `node --conditions=@sage/source demo/main.ts --help` here
// (the condition makes the workspace packages resolve to their sources, see CONTRIBUTING.md).
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import { NodeRuntime } from "@effect/platform-node"
import * as Account from "./account.ts"
import * as Options from "./options.ts"
import { monotonicMicros, type WorkerParams } from "./protocol.ts"
import * as Report from "./report.ts"
import * as Server from "./server.ts"
import * as Workers from "./workers.ts"

/** The run did not get far enough to check anything (a worker died early, or it all took too long). */
class DemoFailed extends Data.TaggedError("DemoFailed")<{ readonly message: string }> {}

/** The checks failed; the summary already said why, so runMain only sets the exit code. */
class CheckFailed extends Data.TaggedError("CheckFailed")<{ readonly message: string }> {
  override readonly [Runtime.errorReported] = false
}

const lockKey = "account:demo"
const readyTimeoutMillis = 30_000
const runTimeoutMillis = 90_000

const program = Effect.gen(function* () {
  const options = yield* Options.parse(process.argv.slice(2), process.env).pipe(
    Effect.tapError((error) => Effect.sync(() => process.stderr.write(`${error.message}\n(see --help)\n`)))
  )
  const terminal = Report.makeTerminal(process.stdout)
  if (options.help) return terminal.line(Options.usage)
  const { workers: count, deposits, leaseMillis } = options
  const deployment = options.redisUrl === undefined ? `${options.topology}, ${options.flavor}` : "standalone, REDIS_URL"
  terminal.line(
    options.unlocked
      ? `@sage/lock demo (${deployment}) WITHOUT the lock (control run): ` +
          `${count} worker processes x ${deposits} deposits`
      : `@sage/lock demo (${deployment}): ${count} worker processes x ${deposits} deposits on "${lockKey}", ` +
          `lease ${leaseMillis} ms`
  )

  const target = yield* Server.acquire(options)
  terminal.line(`server: ${target.label}`)
  const runId = globalThis.crypto.randomUUID().slice(0, 8)
  const keys: Account.Keys = { balance: `demo:${runId}:balance`, slow: `demo:${runId}:slow` }
  const account = yield* Account.connect(target.connection, keys)
  if (target.external) yield* Effect.addFinalizer(() => Effect.ignore(account.remove))
  yield* account.set(0)

  // Midway the parent sets the slow mark; the next holder takes it, sleeps for several leases between GET
  // and SET, and is killed there. Without the lock, or without others left to wait, nobody is killed.
  const killPlanned = !options.unlocked && count >= 2 && deposits >= 3
  if (!killPlanned) terminal.line("(no kill step: it needs the lock, 2 workers and 3 deposits each)")
  const paramsFor = (worker: number): WorkerParams => ({
    worker,
    connection: target.connection,
    namespace: `demo-${runId}`,
    lockKey,
    balanceKey: keys.balance,
    slowKey: keys.slow,
    deposits,
    leaseMillis,
    waitTimeoutMillis: 10_000,
    useLock: !options.unlocked,
    bodyMillis: 5,
    slowMillis: 3 * leaseMillis + 1_000
  })
  const messages = yield* Queue.unbounded<Workers.Message>()
  const workers = yield* Effect.forEach(
    Array.from({ length: count }, (_, i) => i + 1),
    (worker) => Workers.spawn(paramsFor(worker), messages)
  )
  const tally = Report.makeTally(count, yield* Clock.currentTimeMillis)
  const show = (lines: ReadonlyArray<string>) => Effect.sync(() => lines.forEach(terminal.line))

  // Phase 1: wait until every worker has connected, then start them together.
  let ready = 0
  yield* Effect.gen(function* () {
    while (ready < count) {
      const message = yield* Queue.take(messages)
      yield* show(Report.record(tally, message, yield* Clock.currentTimeMillis))
      if (message._tag === "Exited") {
        return yield* new DemoFailed({ message: `worker ${message.worker} exited before it was ready` })
      }
      if (message._tag === "Event" && message.event._tag === "ready") ready++
    }
  }).pipe(
    Effect.timeoutOrElse({
      duration: readyTimeoutMillis,
      orElse: () => Effect.fail(new DemoFailed({ message: `only ${ready} of ${count} workers were ready in time` }))
    })
  )
  tally.startedAt = yield* Clock.currentTimeMillis
  terminal.line(`${count} workers ready (pids ${[...tally.workers.values()].map((s) => s.pid).join(", ")}); go`)
  yield* Effect.forEach(workers, (worker) => worker.start, { discard: true })

  const tick = process.stdout.isTTY === true ? "250 millis" : "1 second"
  const ticker = yield* Effect.forkScoped(
    Effect.repeat(
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => terminal.progress(Report.progressLine(tally, now)))
      ),
      Schedule.spaced(tick)
    )
  )

  // Phase 2: follow the events until every worker has exited; kill the victim inside its slow body.
  let exited = 0
  yield* Effect.gen(function* () {
    while (exited < count) {
      const message = yield* Queue.take(messages)
      const now = yield* Clock.currentTimeMillis
      yield* show(Report.record(tally, message, now))
      if (message._tag === "Exited") exited++
      if (killPlanned && Report.shouldArm(tally, deposits)) {
        yield* account.markSlow
        tally.armed = true
        const done = Report.completedDeposits(tally)
        terminal.line(`midway (${done} of ${count * deposits} deposits made): the next lock holder gets a slow body`)
      }
      if (message._tag !== "Event" || message.event._tag !== "acquired" || !message.event.slow) continue
      const event = message.event
      const handle = workers[event.worker - 1]
      if (tally.kill !== undefined || handle === undefined) continue
      yield* handle.kill
      Report.recordKill(tally, event.worker, event.deposit, now, monotonicMicros())
      terminal.line(
        `w${event.worker} holds the lock for deposit ${event.deposit}: SIGKILL to pid ${handle.pid} inside its body. ` +
          `It cannot release, so the others wait for its lease (${leaseMillis} ms) to expire`
      )
    }
  }).pipe(
    Effect.timeoutOrElse({
      duration: runTimeoutMillis,
      orElse: () => Effect.fail(new DemoFailed({ message: `workers still running after ${runTimeoutMillis} ms` }))
    })
  )
  yield* Fiber.interrupt(ticker)
  terminal.line(Report.progressLine(tally, yield* Clock.currentTimeMillis))

  const result = Report.verdict(tally, yield* account.get, killPlanned)
  yield* show(Report.summary(tally, result, leaseMillis))
  if (result.problems.length > 0) return yield* new CheckFailed({ message: result.problems.join("; ") })
})

program.pipe(
  Effect.onInterrupt(() =>
    Effect.sync(() => process.stdout.write("\ninterrupted: stopping the workers and the server\n"))
  ),
  Effect.scoped,
  NodeRuntime.runMain
)
