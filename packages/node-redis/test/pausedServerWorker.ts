// One process of the process-lifetime test (ProcessLifetime.test.ts): a program run with
// `Effect.runPromise` (no runtime that keeps the process alive) that takes a lock once, then freezes
// the server (SIGSTOP to its pid) and asks for the lock again with a 1 s wait. Nothing but the lock's
// command and its time limit is pending then, so the outcome it prints shows whether the process
// lived until the limit ended the call. Run as
// `node --conditions=@sage/source pausedServerWorker.ts <url> <server pid> <namespace>`.
import * as Effect from "effect/Effect"
import { Lock } from "@sage/lock"
import { runWorker } from "./workerMain.ts"

const [url, serverPid, namespace] = process.argv.slice(2)

const program = Effect.gen(function* () {
  yield* Lock.withLock("lifetime", { waitTimeout: "5 seconds" })(Effect.void)
  process.stdout.write("first call: held and released\n")
  process.kill(Number(serverPid), "SIGSTOP")
  const start = performance.now()
  const outcome = yield* Lock.withLock("lifetime", { waitTimeout: "1 second" })(Effect.void).pipe(Effect.result)
  const elapsed = Math.round(performance.now() - start)
  const tag = outcome._tag === "Success" ? "Success" : outcome.failure._tag
  process.stdout.write(`second call: ${tag} after ${elapsed} ms\n`)
})

runWorker(program, url!, namespace!)
