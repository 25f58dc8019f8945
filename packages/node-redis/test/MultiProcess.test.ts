// Mutual exclusion across processes on a Cluster: the demo (scripts/demo) runs as a child process and
// starts a three-master cluster, then worker processes that each make a non-atomic GET, sleep, SET
// increment under `withLock` through `NodeRedisBackend.layerCluster`; one is SIGKILLed while it holds
// the lock. The demo exits 0 only if the final balance equals the completed deposits and no two lock
// bodies overlapped (each body reports its entry and exit on the host's monotonic clock). The
// in-process contract suites cannot see this: their contenders share one client and one event loop.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { ServerBinary } from "@sage/lock-testkit"

// Relative to this file, so a fresh clone anywhere works.
const scriptsDir = fileURLToPath(new URL("../../../scripts", import.meta.url))

const testTimeoutMillis = 90_000
/** Our own bound, below the test's, so a stuck demo is stopped here (and cleans up) with its output. */
const demoTimeoutMillis = 80_000

interface Outcome {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly output: string
}

/**
 * Runs the demo to its end. If the fiber is interrupted first (our bound, the test's timeout), the demo
 * gets SIGTERM, on which it stops its workers and servers.
 */
const runDemo = (flavor: ServerBinary.Flavor, args: ReadonlyArray<string>): Effect.Effect<Outcome> =>
  Effect.callback<Outcome>((resume) => {
    const child = ChildProcess.spawn(process.execPath, ["--conditions=@sage/source", "demo/main.ts", ...args], {
      cwd: scriptsDir,
      // REDIS_URL would select an external standalone server, which the cluster topology refuses.
      env: { ...process.env, DEMO_TOPOLOGY: "cluster", DEMO_SERVER: flavor, REDIS_URL: "" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.once("error", (error) => resume(Effect.succeed({ code: null, signal: null, output: `${output}\n${error}` })))
    child.once("close", (code, signal) => resume(Effect.succeed({ code, signal, output })))
    return Effect.sync(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    })
  })

/** The pids the demo printed (servers and workers) that still exist. */
const survivors = (output: string): Array<number> => {
  const pids = [
    ...[...output.matchAll(/\(pid (\d+)\)/g)].map((match) => Number(match[1])),
    ...[...output.matchAll(/\(pids ([\d, ]+)\)/g)].flatMap((match) => (match[1] ?? "").split(", ").map(Number))
  ]
  return pids.filter((pid) => {
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  })
}

describe("multi-process exclusion on a Cluster (scripts/demo)", () => {
  for (const flavor of ServerBinary.flavorsUnderTest()) {
    it.live(
      `${flavor}: 3 worker processes x 15 deposits, one killed holding the lock`,
      () =>
        Effect.gen(function* () {
          const outcome = yield* runDemo(flavor, ["--workers", "3", "--deposits", "15"]).pipe(
            Effect.timeoutOrElse({
              duration: demoTimeoutMillis,
              orElse: () => Effect.die(new Error(`the demo ran longer than ${demoTimeoutMillis} ms`))
            })
          )
          const { output } = outcome
          assert.strictEqual(outcome.code, 0, `demo exit ${outcome.code ?? outcome.signal}:\n${output}`)
          assert.include(output, `@sage/lock demo (cluster, ${flavor})`, output)
          assert.match(output, /SIGKILL to pid \d+ inside its body/, output)
          assert.match(output, /exclusion check: OK \(\d+ bodies, none began before another had left\)/, output)
          assert.include(output, "balance check: OK", output)
          assert.notInclude(output, "problem:", output)
          // The demo stops its workers and the cluster before it exits; give an exiting process a moment.
          let alive = survivors(output)
          for (let i = 0; i < 20 && alive.length > 0; i++) {
            yield* Effect.sleep("100 millis")
            alive = survivors(output)
          }
          assert.deepStrictEqual(alive, [], `processes the demo started are still running:\n${output}`)
        }),
      testTimeoutMillis
    )
  }
})
