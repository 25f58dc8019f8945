// The end of a child-process worker for the multi-process tests (fencingWorker.ts,
// pausedServerWorker.ts): runs `program` with `Effect.runPromise` over a lock client on `url` in
// `namespace` (5 s lease), then exits 0, or 1 with the failure on stderr.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Lock } from "@sage/lock"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

export const runWorker = <E>(program: Effect.Effect<void, E, Lock.Lock>, url: string, namespace: string): void => {
  const LockLive = Lock.layer({ namespace, leaseDuration: "5 seconds" }).pipe(
    Layer.provide(NodeRedisBackend.layer({ url }))
  )
  Effect.runPromise(program.pipe(Effect.provide(LockLive))).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`${String(error)}\n`)
      process.exit(1)
    }
  )
}
