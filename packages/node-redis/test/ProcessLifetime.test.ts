// A lock command's time limit keeps working in a process that has nothing else to do. The limits
// share one unreferenced timer (src/internal/connection/deadlines.ts), which does not keep the process alive
// by itself: what does is the client's connection, open while a command waits for its reply. Here a
// child process run with `Effect.runPromise` freezes the server and asks for a lock with a 1 s
// wait: it must live until the limit ends the call and report `TimedOut`, not exit silently with the
// call unfinished or hang past it.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"

const worker = fileURLToPath(new URL("./pausedServerWorker.ts", import.meta.url))

const runWorker = (url: string, serverPid: number) =>
  Effect.callback<{ code: number | null; output: string }>((resume) => {
    const namespace = `lifetime-${Math.random().toString(36).slice(2, 8)}`
    const child = ChildProcess.spawn(
      process.execPath,
      ["--conditions=@sage/source", worker, url, String(serverPid), namespace],
      { stdio: ["ignore", "pipe", "pipe"] }
    )
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    child.once("error", (error) => resume(Effect.succeed({ code: null, output: `${output}\n${error}` })))
    child.once("close", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    })
  })

describe("a lock command's time limit in a process with nothing else pending", () => {
  for (const flavor of ServerBinary.flavorsUnderTest()) {
    it.live(
      `${flavor}: a frozen server ends the call with TimedOut at its limit`,
      () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          const pid = server.pid
          const { code, output } = yield* runWorker(server.url, pid).pipe(
            Effect.timeoutOrElse({
              duration: "30 seconds",
              orElse: () => Effect.succeed({ code: null, output: "the worker ran longer than 30 s" })
            }),
            // The worker froze the server itself; thaw it so the scope can stop it.
            Effect.ensuring(Effect.sync(() => process.kill(pid, "SIGCONT")))
          )
          assert.strictEqual(code, 0, output)
          assert.include(output, "first call: held and released", output)
          const match = /second call: (\w+) after (\d+) ms/.exec(output)
          assert.isNotNull(match, output)
          assert.strictEqual(match![1], "TimedOut", output)
          // The wait was 1 s, and cleaning up an acquisition that may have run on the frozen server
          // takes up to one more (about 2 s here); the bound above that is wide, for a busy machine.
          assert.isAtLeast(Number(match![2]), 1000, output)
          assert.isBelow(Number(match![2]), 15_000, output)
        }).pipe(Effect.scoped),
      60_000
    )
  }
})
