// One process of the multi-process fencing test (MultiProcessFencing.test.ts): takes the lock
// `count` times through its own client and prints, per acquisition, the fencing token and the
// host's monotonic time (ns) at which its body started, one `token enteredAt` line each.
// Run as `node --conditions=@sage/source fencingWorker.ts <url> <namespace> <count>`.
import * as Effect from "effect/Effect"
import { Lease, Lock } from "@sage/lock"
import { runWorker } from "./workerMain.ts"

const [url, namespace, count] = process.argv.slice(2)

const program = Effect.gen(function* () {
  const lines: Array<string> = []
  for (let i = 0; i < Number(count); i++) {
    const token = yield* Lease.fencingToken.pipe(
      Effect.tap((token) =>
        Effect.sync(() => {
          // Bodies are exclusive: body start times order the acquisitions across processes.
          lines.push(`${token} ${process.hrtime.bigint()}`)
        })
      ),
      Lock.withLock("shared", { waitTimeout: "60 seconds" })
    )
    if (!Number.isSafeInteger(token)) return yield* Effect.die(new Error(`not a safe integer: ${token}`))
  }
  process.stdout.write(`${lines.join("\n")}\n`)
})

runWorker(program, url!, namespace!)
