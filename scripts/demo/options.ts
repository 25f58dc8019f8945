// The demo's command line and environment: how many workers and deposits, the lease, which server.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import { parseArgs } from "node:util"
import type { ServerBinary } from "@sage/lock-testkit"
import { type Topology, topologies } from "./protocol.ts"

export interface DemoOptions {
  readonly help: boolean
  readonly workers: number
  readonly deposits: number
  readonly leaseMillis: number
  /** Skip the lock: the control experiment, expected to fail the balance check. */
  readonly unlocked: boolean
  /** Use this server instead of starting one (standalone only). */
  readonly redisUrl: string | undefined
  readonly flavor: ServerBinary.Flavor
  /** What to start: one server, a cluster, or a master with replicas under sentinels. */
  readonly topology: Topology
}

/** A bad flag or variable; main.ts prints the message itself, without a stack trace. */
export class OptionsError extends Data.TaggedError("OptionsError")<{ readonly message: string }> {
  override readonly [Runtime.errorReported] = false
}

export const usage = `usage: node --conditions=@sage/source demo/main.ts [--workers N] [--deposits N] [--lease-ms N] [--unlocked]
                                                   [--topology standalone|cluster|sentinel]

Worker processes deposit into one Redis balance with a non-atomic GET/SET under @sage/lock's
withLock; midway one worker is SIGKILLed while it holds the lock. Exits 0 when the final balance
equals the number of completed deposits and no surviving worker lost the lock.

  --workers N    worker processes, 1-16 (env DEMO_WORKERS, default 4)
  --deposits N   deposits per worker, 1-1000 (env DEMO_DEPOSITS, default 25)
  --lease-ms N   lock lease in milliseconds, 100-10000 (env DEMO_LEASE_MS, default 1000)
  --unlocked     run the same GET/SET without the lock, to watch updates get lost (exits 1)
  --topology T   standalone (one server), cluster (3 masters with a replica each) or sentinel
                 (a master, 2 replicas, 3 sentinels) (env DEMO_TOPOLOGY, default standalone)

  REDIS_URL      use this standalone server instead of starting one (not with DEMO_SERVER)
  DEMO_SERVER    the server the demo starts: redis7 (default: redis-server) or valkey8
                 (valkey-server; VALKEY_SERVER_BIN)`

const integer = (
  label: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number
): Effect.Effect<number, OptionsError> => {
  if (raw === undefined || raw === "") return Effect.succeed(fallback)
  const value = Number(raw)
  return Number.isInteger(value) && value >= min && value <= max
    ? Effect.succeed(value)
    : Effect.fail(
        new OptionsError({ message: `${label} must be an integer in ${min}..${max}, got ${JSON.stringify(raw)}` })
      )
}

/** Reads flags (which win) and environment variables. */
export const parse = (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Effect.Effect<DemoOptions, OptionsError> =>
  Effect.gen(function* () {
    const { values } = yield* Effect.try({
      try: () =>
        parseArgs({
          args: [...argv],
          options: {
            workers: { type: "string" },
            deposits: { type: "string" },
            "lease-ms": { type: "string" },
            unlocked: { type: "boolean" },
            topology: { type: "string" },
            help: { type: "boolean", short: "h" }
          }
        }),
      catch: (cause) => new OptionsError({ message: cause instanceof Error ? cause.message : String(cause) })
    })
    const serverName = env["DEMO_SERVER"] ?? ""
    const server = serverName === "" ? "redis7" : serverName
    if (server !== "redis7" && server !== "valkey8") {
      return yield* new OptionsError({
        message: `DEMO_SERVER must be redis7 or valkey8, got ${JSON.stringify(server)}`
      })
    }
    const topologyName = values.topology ?? env["DEMO_TOPOLOGY"] ?? ""
    const topology = topologyName === "" ? "standalone" : topologies.find((name) => name === topologyName)
    if (topology === undefined) {
      return yield* new OptionsError({
        message: `--topology must be standalone, cluster or sentinel, got ${JSON.stringify(topologyName)}`
      })
    }
    const redisUrl = env["REDIS_URL"]
    if (redisUrl !== undefined && redisUrl !== "" && topology !== "standalone") {
      return yield* new OptionsError({
        message: `REDIS_URL names one standalone server; unset it to run on a ${topology} the demo starts`
      })
    }
    // DEMO_SERVER picks the server the demo starts; with REDIS_URL it starts none, so one of the two
    // would be ignored: refuse the pair instead of guessing which one was meant.
    if (redisUrl !== undefined && redisUrl !== "" && serverName !== "") {
      return yield* new OptionsError({
        message: `REDIS_URL (your server) and DEMO_SERVER=${serverName} (a server the demo starts) exclude each other; unset one`
      })
    }
    return {
      help: values.help === true,
      workers: yield* integer("--workers", values.workers ?? env["DEMO_WORKERS"], 4, 1, 16),
      deposits: yield* integer("--deposits", values.deposits ?? env["DEMO_DEPOSITS"], 25, 1, 1000),
      leaseMillis: yield* integer("--lease-ms", values["lease-ms"] ?? env["DEMO_LEASE_MS"], 1000, 100, 10_000),
      unlocked: values.unlocked === true,
      redisUrl: redisUrl === undefined || redisUrl === "" ? undefined : redisUrl,
      flavor: server,
      topology
    }
  })
