// The pause demo (scripts/demo/pause.ts) as a test: a holder process frozen (SIGSTOP) longer than its
// lease, with its deposit in flight, resumes after another client deposited. Without fencing its
// stale write is a lost update; with fencing it is rejected and the balance stays exact, which is
// what the demo's exit code reports. Only real processes can be frozen like this.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { ServerBinary } from "@sage/lock-testkit"

const scriptsDir = fileURLToPath(new URL("../../../scripts", import.meta.url))

const runDemo = (flavor: ServerBinary.Flavor): Effect.Effect<{ code: number | null; output: string }> =>
  Effect.callback((resume) => {
    const child = ChildProcess.spawn(process.execPath, ["--conditions=@sage/source", "demo/pause.ts"], {
      cwd: scriptsDir,
      env: { ...process.env, DEMO_SERVER: flavor },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.once("close", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => {
      if (child.exitCode === null) child.kill("SIGTERM")
    })
  })

describe("the pause demo (scripts/demo/pause.ts)", () => {
  for (const flavor of ServerBinary.flavorsUnderTest()) {
    it.live(
      `${flavor}: the frozen holder's stale write is a lost update without fencing and rejected with it`,
      () =>
        Effect.gen(function* () {
          const { code, output } = yield* runDemo(flavor).pipe(Effect.timeout("50 seconds"))
          assert.strictEqual(code, 0, output)
          assert.include(output, "[unfenced] A: write written", output)
          assert.include(output, "LOST UPDATE (expected 200)", output)
          assert.include(output, "[fenced] A: write rejected", output)
          assert.include(output, "fenced run: exact, the stale write was rejected", output)
        }),
      60_000
    )
  }
})
