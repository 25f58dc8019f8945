// What both entry points of the peers bench (main.ts, interleaved.ts) run their measurements in: one
// throwaway loopback Redis 7 from the test kit, the server's counters, and the worker processes, all
// stopped when the run ends (also on failure, timeout or Ctrl-C), with the whole run cut off after
// `timeout`; progress on stderr, and the report's lines about where it ran.
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { RedisServer } from "@sage/lock-testkit"
import * as Counters from "./counters.ts"
import { now } from "../stats.ts"
import { loadAverage, machine, progressTo, serverVersion, versions } from "./environment.ts"
import * as Processes from "./processes.ts"

export class PeersBenchError extends Data.TaggedError("PeersBenchError")<{ readonly message: string }> {}

const describe = (cause: unknown): string => (cause instanceof Error ? (cause.stack ?? cause.message) : String(cause))

/** What a run answers: `run`'s result, how long it all took, and the report's lines about where it ran. */
export interface Ran<A> {
  readonly result: A
  readonly seconds: number
  /** Markdown bullets: the machine, the versions, the load average at the start and at the end. */
  readonly environment: ReadonlyArray<string>
}

/**
 * Starts the server and the counters, runs `run` over a fresh set of worker processes (progress lines
 * on stderr labelled `label`; their libraries from `drivers` if given, see processes.ts), and answers
 * its result with what the report says about the run.
 */
export const withWorkers = <A>(options: {
  readonly label: string
  readonly drivers?: string
  readonly timeout: Duration.Input
  readonly run: (processes: Processes.Processes, signal: AbortSignal, progress: (text: string) => void) => Promise<A>
}) => {
  const began = now()
  const startLoad = loadAverage()
  const progress = progressTo(options.label, began)
  return Effect.scoped(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const version = yield* serverVersion(server)
      progress(`${version} ready on ${server.url}`)
      const counters = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => Counters.connect(server.url),
          catch: (cause) => new PeersBenchError({ message: `cannot read the server's counters: ${String(cause)}` })
        }),
        (counters) => Effect.promise(() => counters.close())
      )
      const processes = yield* Effect.acquireRelease(
        Effect.sync(() => Processes.make(server.url, counters.read, () => server.pid, options.drivers)),
        (processes) => Effect.promise(() => processes.stopAll())
      )
      const result = yield* Effect.tryPromise({
        try: (signal) => options.run(processes, signal, progress),
        catch: (cause) => new PeersBenchError({ message: describe(cause) })
      })
      const ran: Ran<A> = {
        result,
        seconds: Math.round((now() - began) / 1000),
        environment: [
          `- ${machine()}`,
          `- ${versions(version)}`,
          `- load average (1/5/15 min) at start ${startLoad}, at end ${loadAverage()}`
        ]
      }
      return ran
    })
  ).pipe(
    Effect.timeoutOrElse({
      duration: options.timeout,
      orElse: () => Effect.fail(new PeersBenchError({ message: `not finished within ${String(options.timeout)}` }))
    })
  )
}
