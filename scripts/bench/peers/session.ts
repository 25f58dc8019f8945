// What both entry points of the peers bench (main.ts, interleaved.ts) run their measurements in: one
// throwaway loopback Redis 7 from the test kit, the server's counters, and the worker processes, all
// stopped when the run ends (also on failure, timeout or Ctrl-C), with the whole run cut off after
// `timeout`.
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { RedisServer } from "@sage/lock-testkit"
import * as Counters from "./counters.ts"
import { serverVersion } from "./environment.ts"
import * as Processes from "./processes.ts"

export class PeersBenchError extends Data.TaggedError("PeersBenchError")<{ readonly message: string }> {}

const describe = (cause: unknown): string => (cause instanceof Error ? (cause.stack ?? cause.message) : String(cause))

/**
 * Starts the server and the counters, runs `run` over a fresh set of worker processes, and answers its
 * result with the server's version ("redis 7.0.15").
 */
export const withWorkers = <A>(options: {
  readonly timeout: Duration.Input
  readonly progress: (text: string) => void
  readonly run: (processes: Processes.Processes, signal: AbortSignal) => Promise<A>
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const version = yield* serverVersion(server)
      options.progress(`${version} ready on ${server.url}`)
      const counters = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => Counters.connect(server.url),
          catch: (cause) => new PeersBenchError({ message: `cannot read the server's counters: ${String(cause)}` })
        }),
        (counters) => Effect.promise(() => counters.close())
      )
      const processes = yield* Effect.acquireRelease(
        Effect.sync(() => Processes.make(server.url, counters.read, () => server.pid)),
        (processes) => Effect.promise(() => processes.stopAll())
      )
      const result = yield* Effect.tryPromise({
        try: (signal) => options.run(processes, signal),
        catch: (cause) => new PeersBenchError({ message: describe(cause) })
      })
      return { result, version }
    })
  ).pipe(
    Effect.timeoutOrElse({
      duration: options.timeout,
      orElse: () => Effect.fail(new PeersBenchError({ message: `not finished within ${String(options.timeout)}` }))
    })
  )
