// The election demo (scripts/demo/election) as a test: three candidate processes, one killed
// (SIGKILL) while it leads and one frozen (SIGSTOP) past its lease, then five resignations. The demo
// exits 0 only when no two processes did accepted leader work at once, the observer's terms only went
// up, and each change was seen within its bound; the bounds get 1.5 s of slack here, for loaded
// machines. Only real processes can be killed and frozen like this.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { ServerBinary } from "@sage/lock-testkit"

const scriptsDir = fileURLToPath(new URL("../../../scripts", import.meta.url))

type Topology = "standalone" | "sentinel" | "cluster"

const runDemo = (
  flavor: ServerBinary.Flavor,
  topology: Topology
): Effect.Effect<{ code: number | null; output: string }> =>
  Effect.callback((resume) => {
    const child = ChildProcess.spawn(
      process.execPath,
      ["--conditions=@sage/source", "demo/election/main.ts", "--topology", topology],
      {
        cwd: scriptsDir,
        env: { ...process.env, DEMO_SERVER: flavor, DEMO_BOUNDS_SLACK_MS: "1500" },
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.once("close", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => {
      if (child.exitCode === null) child.kill("SIGTERM")
    })
  })

// Every topology on the first flavor; the others run standalone, where the servers differ most
// (one run takes 15-20 s).
const flavors = ServerBinary.flavorsUnderTest().filter((flavor) => flavor === "redis7" || flavor === "valkey8")
const runs = flavors.flatMap((flavor, i): ReadonlyArray<readonly [ServerBinary.Flavor, Topology]> =>
  i === 0
    ? [
        [flavor, "standalone"],
        [flavor, "sentinel"],
        [flavor, "cluster"]
      ]
    : [[flavor, "standalone"]]
)

describe("the election demo (scripts/demo/election)", () => {
  for (const [flavor, topology] of runs) {
    it.live(
      `${flavor}, ${topology}: one leader at a time through a kill, a freeze and five resignations`,
      () =>
        Effect.gen(function* () {
          const { code, output } = yield* runDemo(flavor, topology).pipe(Effect.timeout("80 seconds"))
          assert.strictEqual(code, 0, output)
          assert.match(output, /\+\d+\.\d{3}s {2}term \d+ led by c[123] \(pid \d+\)/, output)
          assert.match(output, /\+\d+\.\d{3}s {2}nobody leads/, output)
          assert.include(output, ">> SIGKILL", output)
          assert.include(output, ">> SIGCONT", output)
          assert.include(output, ">> resign 5:", output)
          assert.include(output, "PASS: one leader at a time", output)
        }),
      90_000
    )
  }
})
