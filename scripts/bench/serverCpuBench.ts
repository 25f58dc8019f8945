// What the server-CPU benchmarks (serverCost.ts, semaphoreExpiry.ts) share: their plan of rounds and
// cycles, one node-redis client on the server with their scripts loaded, and the program that runs
// them on each server flavor and prints the report.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createClient } from "redis"
import type { ServerBinary } from "@sage/lock-testkit"
import * as Arguments from "./arguments.ts"
import { load1 } from "./stats.ts"

/** Rounds of `cycles` measured cycles each. */
export interface Plan {
  readonly rounds: number
  readonly cycles: number
}

export type Client = ReturnType<typeof createClient>

/** A client on `url` with every one of `scripts` loaded (so `EVALSHA` never meets `NOSCRIPT`). */
export const withScripts = <E>(
  url: string,
  scripts: ReadonlyArray<string>,
  onError: (message: string) => E
): Effect.Effect<Client, E, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client: Client = createClient({ url })
        await client.connect()
        for (const lua of scripts) await client.scriptLoad(lua)
        return client
      },
      catch: (cause) => onError(`cannot connect to ${url}: ${String(cause)}`)
    }),
    (client) => Effect.promise(() => client.close())
  )

/**
 * A server-CPU benchmark's program: parses `--quick`, runs `runOn` for each flavor in turn, and
 * writes `heading` and each flavor's table to stdout.
 */
export const program = <E>(options: {
  readonly usage: string
  readonly full: Plan
  readonly quick: Plan
  readonly flavors: ReadonlyArray<ServerBinary.Flavor>
  readonly runOn: (flavor: ServerBinary.Flavor, plan: Plan) => Effect.Effect<string, E>
  readonly heading: (plan: Plan, load: { readonly before: number; readonly after: number }) => string
}) =>
  Effect.gen(function* () {
    const args = yield* Arguments.parse(options.usage)
    if (args === undefined) return
    const plan = args.quick ? options.quick : options.full
    const before = load1()
    const reports: Array<string> = []
    for (const flavor of options.flavors) reports.push(`### ${flavor}\n\n${yield* options.runOn(flavor, plan)}`)
    process.stdout.write(`${options.heading(plan, { before, after: load1() })}\n\n${reports.join("\n\n")}\n`)
  })
