// The election demo: three candidate processes campaign for one election while this process
// observes it and prints the term log. The first leader is killed (SIGKILL), the next is frozen
// (SIGSTOP) past its lease and resumed, and the lead is resigned five times. Every leader writes a
// shared key, fenced by its term. Exits 1 if two processes did accepted leader work at once, the
// observer saw a term repeat or go back, or a change of leader took longer than its bound
// (`DEMO_BOUNDS_SLACK_MS` widens the bounds for loaded machines); 0 otherwise.
//
// `npm run demo:election` at the repo root (`-- --topology cluster|sentinel`; DEMO_SERVER=valkey8 for
// Valkey), or `node --conditions=@sage/source demo/election/main.ts` in scripts/. It starts its own
// throwaway servers. The candidates are candidate.ts.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import { parseArgs } from "node:util"
import { NodeRuntime } from "@effect/platform-node"
import { Election, LockScripts } from "@sage/lock"
import { LockAdmin } from "@sage/lock-node-redis"
import type { DemoOptions } from "../options.ts"
import { monotonicMicros, topologies } from "../protocol.ts"
import * as Server from "../server.ts"
import * as Candidates from "./candidates.ts"
import * as Checks from "./checks.ts"
import * as Connections from "./connections.ts"
import * as Observer from "./observer.ts"
import * as Script from "./script.ts"

/** A bad flag or variable; the program prints the message itself, without a stack trace. */
class OptionsError extends Data.TaggedError("OptionsError")<{ readonly message: string }> {
  override readonly [Runtime.errorReported] = false
}

/** The checks failed; the summary already said why, so runMain only sets the exit code. */
class CheckFailed extends Data.TaggedError("CheckFailed")<{ readonly message: string }> {
  override readonly [Runtime.errorReported] = false
}

const leaseMillis = 2_000
const observeMillis = 250
const electionName = "demo"
const candidateIds = ["c1", "c2", "c3"]

/** The deployment to start: `--topology` or DEMO_TOPOLOGY, DEMO_SERVER; and the bounds' slack. */
const parseOptions = (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv) =>
  Effect.gen(function* () {
    const { values } = yield* Effect.try({
      try: () => parseArgs({ args: [...argv], options: { topology: { type: "string" } } }),
      catch: (cause) => new OptionsError({ message: cause instanceof Error ? cause.message : String(cause) })
    })
    const flavor = env["DEMO_SERVER"] || "redis7"
    if (flavor !== "redis7" && flavor !== "valkey8") {
      return yield* new OptionsError({
        message: `DEMO_SERVER must be redis7 or valkey8, got ${JSON.stringify(flavor)}`
      })
    }
    const name = values.topology || env["DEMO_TOPOLOGY"] || "standalone"
    const topology = topologies.find((known) => known === name)
    if (topology === undefined) {
      return yield* new OptionsError({
        message: `--topology must be standalone, cluster or sentinel, got ${JSON.stringify(name)}`
      })
    }
    const rawSlack = env["DEMO_BOUNDS_SLACK_MS"] || "0"
    const slack = Number(rawSlack)
    if (!Number.isInteger(slack) || slack < 0) {
      return yield* new OptionsError({
        message: `DEMO_BOUNDS_SLACK_MS must be a whole number of ms, got ${JSON.stringify(rawSlack)}`
      })
    }
    // The server options of the other demos; their worker and deposit counts do not apply here.
    const options: DemoOptions = {
      help: false,
      workers: candidateIds.length,
      deposits: 0,
      leaseMillis,
      unlocked: false,
      redisUrl: undefined,
      flavor,
      topology
    }
    return { options, slackMillis: slack }
  })

const line = (text: string): void => {
  process.stdout.write(`${text}\n`)
}

/** The run on a started deployment: observer, candidates, the script, the checks. */
const demo = (options: DemoOptions, target: Server.Target, slackMillis: number) =>
  Effect.gen(function* () {
    const id = globalThis.crypto.randomUUID().slice(0, 8)
    const namespace = `election-demo-${id}`
    const store = yield* Connections.connect(target.connection)
    const lockKey = LockScripts.lockKey(namespace, electionName)

    const startedAt = monotonicMicros()
    const time = (at: number) => Observer.elapsed(startedAt, at)
    const say = (text: string) => line(`  ${time(monotonicMicros())}  ${text}`)
    line("\nterm log (what the observer is shown), with the script's steps (>>) and the candidates' reports:")
    const elections = yield* Election.make({ namespace, leaseDuration: leaseMillis, observeInterval: observeMillis })
    const observer = yield* Observer.start(elections, electionName, startedAt, (text) => line(`  ${text}`))

    const log: Array<Candidates.Heard> = []
    const onEvent = ({ candidate, event }: Candidates.Heard) => {
      if (event.t === "lead") say(`   ${candidate}: work starts in term ${event.term}`)
      if (event.t === "end") say(`   ${candidate}: work of term ${event.term} ends (${event.how})`)
      if (event.t === "work" && !event.ok) say(`   ${candidate}: a write of term ${event.term} rejected by the fence`)
      if (event.t === "error") say(`   ${candidate}: a write of term ${event.term} failed: ${event.message}`)
    }
    const candidates = yield* Effect.forEach(candidateIds, (candidate) =>
      Candidates.spawn(
        {
          candidate,
          connection: target.connection,
          namespace,
          election: electionName,
          workKey: `{${namespace}}:work`,
          leaseMillis,
          rejoinMillis: 200,
          workEveryMillis: 50
        },
        log,
        onEvent,
        (text) => say(`   ${candidate}| ${text}`)
      )
    )
    say(`>> candidates started: ${candidates.map((process) => `${process.candidate} (pid ${process.pid})`).join(", ")}`)

    const measured = yield* Script.run({
      observer,
      candidates,
      log,
      waiters: LockAdmin.inspect(store.admin, lockKey).pipe(
        Effect.map((info) => info.waiters),
        Effect.orElseSucceed(() => 0)
      ),
      leaseMillis,
      frozenMillis: leaseMillis + 1_000,
      resignRounds: 5,
      say
    })
    const verdict = Checks.verdict(
      observer.seen,
      log,
      measured,
      { leaseMillis, observeMillis, slackMillis, resignMillis: 50 },
      time
    )
    line(`\nsummary (${options.topology}, ${options.flavor}):`)
    for (const text of verdict.lines) line(`  ${text}`)
    if (verdict.problems.length > 0) return yield* new CheckFailed({ message: verdict.problems.join("; ") })
  })

const program = Effect.gen(function* () {
  const { options, slackMillis } = yield* parseOptions(process.argv.slice(2), process.env).pipe(
    Effect.tapError((error) => Effect.sync(() => process.stderr.write(`${error.message}\n`)))
  )
  line(
    `@sage/lock election demo (${options.topology}, ${options.flavor}): ${candidateIds.length} candidate processes, ` +
      `lease ${leaseMillis} ms, observer interval ${observeMillis} ms`
  )
  const target = yield* Server.acquire(options)
  line(`server: ${target.label}`)
  // Scoped inside the backend's layer: the candidates and the observer stop before the backend closes.
  yield* demo(options, target, slackMillis).pipe(
    Effect.scoped,
    Effect.provide(Connections.backendLayer(target.connection))
  )
})

program.pipe(
  Effect.onInterrupt(() =>
    Effect.sync(() => process.stdout.write("\ninterrupted: stopping the candidates and the servers\n"))
  ),
  Effect.scoped,
  NodeRuntime.runMain
)
