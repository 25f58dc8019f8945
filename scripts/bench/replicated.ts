// Replicated latency, side by side: standalone, Sentinel and Cluster (Redis 7) all running at once,
// measured in rounds with the order rotated, so that every configuration meets the same moments of
// a shared machine. Each round runs sequential `withLock(key)(Effect.void)` calls on fresh keys in
// every configuration, plus two hand-written node-redis floors: the standalone cycle (SET NX PX,
// compare-and-delete) and the same cycle on the Sentinel master with ROLE and WAIT sent together
// with the SET (what a replicated lock needs at least). The report gives the median over rounds of
// each p50, and the median of the per-round ratios to standalone.
// Run `node --conditions=@sage/source bench/replicated.ts [--quick]` in scripts/ (after
// `source scripts/toolchain.sh`); progress goes to stderr, the Markdown report to stdout.
import * as Crypto from "node:crypto"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { NodeRuntime } from "@effect/platform-node"
import { createClient } from "redis"
import * as Locks from "./locks.ts"
import { load1, median, ms, now, summarize, table } from "./stats.ts"
import * as Targets from "./targets.ts"
import * as Arguments from "./arguments.ts"
import { compareAndDelete } from "./baselineScripts.ts"

class BenchTimeout extends Data.TaggedError("BenchTimeout")<{ readonly message: string }> {}

interface Plan {
  readonly rounds: number
  readonly warmup: number
  readonly iterations: number
}

const full: Plan = { rounds: 7, warmup: 1500, iterations: 1000 }
/** A smoke run of the same code paths; its numbers are too few to quote. */
const quick: Plan = { rounds: 2, warmup: 50, iterations: 100 }

const usage = `usage: node --conditions=@sage/source bench/replicated.ts [--quick]
  Starts standalone, Sentinel (master + 2 replicas, 3 sentinels) and Cluster (3 masters, 1 replica
  each) on redis7 at once, then measures sequential withLock latency on each, acknowledgement on and
  off, in rotated rounds, beside hand-written node-redis floors. About 2 minutes.`

const leaseMillis = 10_000
const runTimeout = "10 minutes"

/** One configuration: runs `n` sequential cycles on fresh keys and returns their latencies (ms). */
interface Config {
  readonly name: string
  /** The configuration this one's per-round ratio is taken against (by name). */
  readonly base: string
  readonly cycles: (n: number, prefix: string) => Effect.Effect<ReadonlyArray<number>, unknown>
}

const lockConfig = (name: string, lock: Locks.LockClient): Config => ({
  name,
  base: "standalone, @sage/lock",
  cycles: (n, prefix) =>
    Effect.gen(function* () {
      const samples: Array<number> = []
      for (let i = 0; i < n; i++) {
        const before = now()
        yield* lock.withLock(`${prefix}:${i}`, { waitTimeout: "20 seconds" })(Effect.void)
        samples.push(now() - before)
      }
      return samples
    })
})

/** A hand-written cycle on one node-redis client; `replicas` > 0 adds ROLE and WAIT to the SET's round trip. */
const rawConfig = Effect.fnUntraced(function* (name: string, url: string, replicas: number) {
  const client = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const created = createClient({ url })
      created.on("error", () => {})
      await created.connect()
      return created
    }),
    (client) => Effect.promise(() => client.close().catch(() => undefined))
  )
  const sha = String(yield* Effect.promise(() => client.sendCommand(["SCRIPT", "LOAD", compareAndDelete])))
  // node-redis 6 gives every command a 5 s AbortSignal timer unless told otherwise; the lock turns it
  // off too, so the floor does not pay for it.
  const options = { timeout: 0 } as const
  const cycle = async (key: string): Promise<void> => {
    const token = Crypto.randomUUID()
    const set = ["SET", key, token, "NX", "PX", String(leaseMillis)]
    const reply =
      replicas === 0
        ? await client.sendCommand(set, options)
        : (
            await Promise.all([
              client.sendCommand(set, options),
              client.sendCommand(["ROLE"], options),
              client.sendCommand(["WAIT", String(replicas), "100"], options)
            ])
          )[0]
    if (String(reply) !== "OK") throw new Error(`${name}: ${key} was busy`)
    await client.sendCommand(["EVALSHA", sha, "1", key, token], options)
  }
  const config: Config = {
    name,
    base: "standalone, node-redis by hand",
    cycles: (n, prefix) =>
      Effect.promise(async () => {
        const samples: Array<number> = []
        for (let i = 0; i < n; i++) {
          const before = now()
          await cycle(`${prefix}:${i}`)
          samples.push(now() - before)
        }
        return samples
      })
  }
  return config
})

const program = Effect.gen(function* () {
  const args = yield* Arguments.parse(usage)
  if (args === undefined) return
  const plan = args.quick ? quick : full
  const began = now()
  const progress = (text: string) =>
    Effect.sync(() => process.stderr.write(`[replicated ${((now() - began) / 1000).toFixed(1)}s] ${text}\n`))
  const runId = Crypto.randomUUID().slice(0, 8)

  yield* progress("starting standalone, Sentinel and Cluster (redis7)")
  const standalone = yield* Targets.standalone("redis7")
  const sentinel = yield* Targets.sentinel("redis7")
  const cluster = yield* Targets.cluster("redis7")
  const lock = (deployment: Targets.Deployment, acknowledge: boolean) =>
    Locks.client(deployment, { namespace: `replicated-${runId}`, leaseMillis, acknowledge })
  if (standalone.url === undefined || sentinel.master === undefined) {
    return yield* Effect.die(new Error("the targets no longer report the URLs this bench needs"))
  }
  const configs: ReadonlyArray<Config> = [
    lockConfig("standalone, @sage/lock", yield* lock(standalone, true)),
    lockConfig("sentinel, ack on", yield* lock(sentinel, true)),
    lockConfig("sentinel, ack off", yield* lock(sentinel, false)),
    lockConfig("cluster, ack on", yield* lock(cluster, true)),
    lockConfig("cluster, ack off", yield* lock(cluster, false)),
    yield* rawConfig("standalone, node-redis by hand", standalone.url, 0),
    yield* rawConfig("sentinel master, node-redis by hand + ROLE + WAIT", sentinel.master.url, sentinel.master.replicas)
  ]
  const descriptions = [standalone, sentinel, cluster].map((d) => `${d.name}: ${d.description}`)

  for (const config of configs) {
    yield* progress(`warm-up: ${config.name}, ${plan.warmup} cycles`)
    yield* config.cycles(plan.warmup, `warm-${config.name.replace(/\W+/g, "-")}`)
  }
  const p50s = new Map<string, Array<number>>(configs.map((config) => [config.name, []]))
  const p99s = new Map<string, Array<number>>(configs.map((config) => [config.name, []]))
  const loads: Array<number> = []
  for (let round = 0; round < plan.rounds; round++) {
    const shift = round % configs.length
    const order = [...configs.slice(shift), ...configs.slice(0, shift)]
    loads.push(load1())
    yield* progress(`round ${round + 1}/${plan.rounds}: ${order.map((config) => config.name).join(" > ")}`)
    for (const config of order) {
      const samples = yield* config.cycles(plan.iterations, `r${round}-${config.name.replace(/\W+/g, "-")}`)
      const summary = summarize(samples)
      p50s.get(config.name)!.push(summary.p50)
      p99s.get(config.name)!.push(summary.p99)
    }
  }

  const rows = configs.map((config) => {
    const own = p50s.get(config.name)!
    const base = p50s.get(config.base)!
    const ratios = own.map((value, i) => value / base[i]!)
    return [
      config.name,
      ms(median(own)),
      `${ms(Math.min(...own))}-${ms(Math.max(...own))}`,
      ms(median(p99s.get(config.name)!)),
      `${median(ratios).toFixed(2)}x`,
      `${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}`,
      config.base
    ]
  })
  const lines = [
    `# Replicated latency, side by side${plan === quick ? " (--quick: smoke run, too few samples to quote)" : ""}`,
    "",
    `- ${new Date().toISOString()}, ${((now() - began) / 1000).toFixed(0)} s; ${plan.rounds} rounds of ${plan.iterations} sequential cycles per configuration, order rotated each round, after ${plan.warmup} warm-up cycles each.`,
    `- 1-minute load at the start of each round: ${loads.map((value) => value.toFixed(2)).join(", ")}.`,
    ...descriptions.map((text) => `- ${text}`),
    "",
    table(
      [
        "configuration",
        "p50 ms (median of rounds)",
        "rounds' p50 range",
        "p99 ms (median)",
        "p50 ratio (median of rounds)",
        "rounds' ratio range",
        "ratio against"
      ],
      rows
    ),
    ""
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n")))
})

Effect.scoped(program).pipe(
  Effect.timeoutOrElse({
    duration: runTimeout,
    orElse: () => Effect.fail(new BenchTimeout({ message: `the bench did not finish within ${runTimeout}` }))
  }),
  NodeRuntime.runMain
)
