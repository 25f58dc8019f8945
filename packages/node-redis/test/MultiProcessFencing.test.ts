// Fencing tokens across processes and client restarts: four worker processes (fencingWorker.ts),
// each with its own client and connection, take one key 500 times each, then four fresh processes
// take it again. Ordered by when each body started (the host's monotonic clock, shared by all
// processes; bodies are exclusive), the tokens must strictly increase, across both rounds. The
// in-process contract suite cannot show this: its clients share one process and one event loop.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"

const testDir = fileURLToPath(new URL(".", import.meta.url))

interface Sample {
  readonly token: number
  readonly enteredAt: bigint
}

/** Runs one worker to its end; fails with its output when it does not exit 0. */
const runWorker = (url: string, namespace: string, count: number): Effect.Effect<Array<Sample>, Error> =>
  Effect.callback<Array<Sample>, Error>((resume) => {
    const child = ChildProcess.spawn(
      process.execPath,
      ["--conditions=@sage/source", "fencingWorker.ts", url, namespace, String(count)],
      { cwd: testDir, stdio: ["ignore", "pipe", "pipe"] }
    )
    let output = ""
    let errors = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (errors += chunk))
    child.once("error", (error) => resume(Effect.fail(error)))
    child.once("close", (code) => {
      if (code !== 0) return resume(Effect.fail(new Error(`worker exited ${code}: ${errors}${output}`)))
      const samples = output
        .trim()
        .split("\n")
        .map((line) => {
          const [token, enteredAt] = line.split(" ")
          return { token: Number(token), enteredAt: BigInt(enteredAt!) }
        })
      resume(Effect.succeed(samples))
    })
    return Effect.sync(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    })
  })

const round = (url: string, namespace: string, count: number) =>
  Effect.map(
    Effect.forEach([1, 2, 3, 4], () => runWorker(url, namespace, count), { concurrency: "unbounded" }),
    (perWorker) => {
      for (const samples of perWorker) assert.strictEqual(samples.length, count, "every acquisition reported")
      return perWorker.flat().toSorted((a, b) => (a.enteredAt < b.enteredAt ? -1 : a.enteredAt > b.enteredAt ? 1 : 0))
    }
  )

describe("fencing tokens across processes (standalone)", () => {
  for (const flavor of ServerBinary.flavorsUnderTest()) {
    it.live(
      `${flavor}: 4 processes x 500 acquisitions, then 4 fresh processes x 250: strictly increasing`,
      () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          const namespace = `fence-${Math.random().toString(36).slice(2, 8)}`
          const first = yield* round(server.url, namespace, 500)
          const second = yield* round(server.url, namespace, 250)
          const all = [...first, ...second]
          assert.strictEqual(all.length, 3_000)
          for (let i = 1; i < all.length; i++) {
            if (!(all[i]!.token > all[i - 1]!.token)) {
              assert.fail(`acquisition ${i}: token ${all[i]!.token} after ${all[i - 1]!.token}`)
            }
          }
        }),
      120_000
    )
  }
})
