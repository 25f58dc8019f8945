// The @sage/lock benchmark: latency, throughput, contention, the standalone pool decision and
// renewal, on throwaway loopback servers (standalone Redis 7 and Valkey 8, Sentinel, Cluster) that
// the test kit starts and kills. Progress goes to stderr, the Markdown report to stdout. Every section
// has fixed iteration counts or durations; the whole run is bounded by `runTimeout`.
// Run `node --conditions=@sage/source bench/main.ts [--quick]` in scripts/ (after `source scripts/toolchain.sh`).
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { NodeRuntime } from "@effect/platform-node"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import type { TestkitError } from "@sage/lock-testkit"
import * as Locks from "./locks.ts"
import { poolDecision } from "./pool.ts"
import * as Report from "./report.ts"
import { load1, now } from "./stats.ts"
import * as Targets from "./targets.ts"
import * as Arguments from "./arguments.ts"

class BenchTimeout extends Data.TaggedError("BenchTimeout")<{ readonly message: string }> {}

interface Plan {
  readonly warmup: number
  readonly iterations: number
  readonly throughputWarmupMillis: number
  readonly throughputMillis: number
  readonly concurrency: number
  readonly contendedFibers: number
  readonly contendedPerFiber: number
  readonly contendedBodyMillis: number
  readonly pool: {
    readonly rounds: number
    readonly sequentialIterations: number
    readonly concurrentIterations: number
    readonly warmup: number
    readonly connects: number
  }
  readonly renewalLeaseMillis: number
  readonly renewalBodyMillis: number
}

const full: Plan = {
  warmup: 1500,
  iterations: 2000,
  throughputWarmupMillis: 500,
  throughputMillis: 3000,
  concurrency: 16,
  contendedFibers: 8,
  contendedPerFiber: 50,
  contendedBodyMillis: 1,
  pool: { rounds: 5, sequentialIterations: 5000, concurrentIterations: 20_000, warmup: 300, connects: 200 },
  renewalLeaseMillis: 300,
  renewalBodyMillis: 3000
}

/** A smoke run of the same code paths in a few seconds; its numbers are too few to quote. */
const quick: Plan = {
  ...full,
  warmup: 20,
  iterations: 200,
  throughputWarmupMillis: 100,
  throughputMillis: 500,
  contendedPerFiber: 10,
  pool: { rounds: 1, sequentialIterations: 300, concurrentIterations: 1200, warmup: 50, connects: 20 },
  renewalBodyMillis: 1000
}

const runTimeout = "5 minutes"
const leaseMillis = 10_000

const usage = `usage: node --conditions=@sage/source bench/main.ts [--quick]
  Starts loopback servers (standalone redis7 and valkey8, Sentinel and Cluster on redis7), measures
  @sage/lock against them and prints Markdown tables to stdout. About 80 seconds; --quick runs every
  section with tiny counts (a smoke test, not a measurement).`

const packageVersion = (name: string): string => {
  try {
    const text = Fs.readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), "utf8")
    return String((JSON.parse(text) as { version?: unknown }).version)
  } catch {
    return "?"
  }
}

const loadAverage = (): string =>
  Os.loadavg()
    .map((value) => value.toFixed(2))
    .join(" ")

type StartError = TestkitError.TestkitError | LockRedisError | InvalidArgument

const program = Effect.gen(function* () {
  const args = yield* Arguments.parse(usage)
  if (args === undefined) return
  const plan = args.quick ? quick : full
  const runId = Crypto.randomUUID().slice(0, 8)
  const began = now()
  const startLoad = loadAverage()
  const progress = (text: string) =>
    Effect.sync(() => process.stderr.write(`[bench ${((now() - began) / 1000).toFixed(1)}s] ${text}\n`))
  const results: Report.Results = { latency: [], throughput: [], contended: [], pool: [], renewal: [] }
  const servers: Array<string> = []

  const measure = Effect.fnUntraced(function* (start: Effect.Effect<Targets.Deployment, StartError, Scope.Scope>) {
    const deployment = yield* start
    servers.push(`${deployment.name}: ${deployment.description}`)
    yield* progress(`${deployment.name} ready (${deployment.description})`)
    const variants =
      deployment.topology === "standalone"
        ? [{ name: deployment.name, slug: "std", acknowledge: true }]
        : [
            { name: `${deployment.name}, ack on`, slug: "ack", acknowledge: true },
            { name: `${deployment.name}, ack off`, slug: "noack", acknowledge: false }
          ]
    const namespace = `bench-${runId}-${deployment.topology}-${deployment.flavor}`
    const clients = yield* Effect.forEach(variants, (variant) =>
      Effect.map(Locks.client(deployment, { namespace, leaseMillis, acknowledge: variant.acknowledge }), (lock) => ({
        ...variant,
        lock
      }))
    )
    for (const { lock, name, slug } of clients) {
      yield* progress(`${name}: latency, ${plan.iterations} sequential withLock`)
      const load = load1()
      const result = yield* Locks.latency(deployment, lock, {
        warmup: plan.warmup,
        iterations: plan.iterations,
        prefix: `lat-${slug}`
      })
      results.latency.push({ name, load, result })
    }
    for (const { lock, name, slug } of clients) {
      yield* progress(`${name}: throughput, ${plan.concurrency} fibers for ${plan.throughputMillis} ms`)
      const load = load1()
      const result = yield* Locks.throughput(deployment, lock, {
        concurrency: plan.concurrency,
        warmupMillis: plan.throughputWarmupMillis,
        durationMillis: plan.throughputMillis,
        prefix: `tp-${slug}`
      })
      results.throughput.push({ name, load, result })
    }
    const [first] = clients
    if (deployment.topology === "standalone" && first !== undefined) {
      const perFiberClients = yield* Effect.forEach(Array.from({ length: plan.contendedFibers }), () =>
        Locks.client(deployment, { namespace: `${namespace}-contended`, leaseMillis, acknowledge: first.acknowledge })
      )
      for (const [variant, locks] of [
        ["one client", [first.lock]],
        ["a client per fibre", perFiberClients]
      ] as const) {
        yield* progress(`${first.name}: ${plan.contendedFibers} fibers contending for one key (${variant})`)
        const load = load1()
        const result = yield* Locks.contended(locks, {
          fibers: plan.contendedFibers,
          perFiber: plan.contendedPerFiber,
          bodyMillis: plan.contendedBodyMillis,
          key: "contended"
        })
        results.contended.push({ name: `${first.name}, ${variant}`, load, result })
      }
    }
    if (deployment.url !== undefined) {
      yield* progress(`${deployment.name}: raw node-redis, shared client versus dedicated pool`)
      const load = load1()
      const result = yield* poolDecision({ url: deployment.url, prefix: `${namespace}-raw`, ...plan.pool })
      results.pool.push({ name: deployment.name, load, result })
    }
    if (first !== undefined) {
      yield* progress(`${first.name}: renewal, lease ${plan.renewalLeaseMillis} ms, body ${plan.renewalBodyMillis} ms`)
      const short = yield* Locks.client(deployment, {
        namespace: `${namespace}-renewal`,
        leaseMillis: plan.renewalLeaseMillis,
        acknowledge: first.acknowledge
      })
      const load = load1()
      const result = yield* Locks.renewal(deployment, short, { bodyMillis: plan.renewalBodyMillis, key: "renewal" })
      results.renewal.push({ name: first.name, load, result })
    }
    yield* progress(`${deployment.name}: done, stopping its servers`)
  })

  yield* Effect.scoped(measure(Targets.standalone("redis7")))
  yield* Effect.scoped(measure(Targets.standalone("valkey8")))
  yield* Effect.scoped(measure(Targets.sentinel("redis7")))
  yield* Effect.scoped(measure(Targets.cluster("redis7")))
  const seconds = ((now() - began) / 1000).toFixed(0)

  const cpus = Os.cpus()
  const lines = [
    `# @sage/lock benchmark${plan === quick ? " (--quick: smoke run, too few samples to quote)" : ""}`,
    "",
    `- ${new Date().toISOString()}, ${seconds} s in total`,
    `- ${cpus.length} cores (${cpus[0]?.model ?? "?"}), ${(Os.totalmem() / 2 ** 30).toFixed(1)} GiB, ` +
      `${Os.type()} ${Os.release()}; client and servers share the cores, all traffic on loopback`,
    `- node ${process.version}, node-redis ${packageVersion("redis")}, effect ${packageVersion("effect")}`,
    ...servers.map((server) => `- ${server}`),
    `- load average (1/5/15 min) at start ${startLoad}, at end ${loadAverage()}; ` +
      "`load1` columns: the 1-minute load when a row started",
    `- lock lease ${leaseMillis} ms (sections 1-3); replicated backends use the default dedicated pool ` +
      "(10 connections per node)",
    "",
    `## 1. Uncontended latency: sequential withLock(key)(Effect.void), ${plan.iterations} fresh keys ` +
      `after ${plan.warmup} warm-up (ratios against ${Report.baseline})`,
    "",
    Report.latencyTable(results.latency),
    "",
    `## 2. Throughput: ${plan.concurrency} fibers on ${plan.concurrency} distinct keys for ` +
      `${plan.throughputMillis} ms (ratios against ${Report.baseline})`,
    "",
    Report.throughputTable(results.throughput),
    "",
    `## 3. Contended: ${plan.contendedFibers} fibers x ${plan.contendedPerFiber} withLock on one key, ` +
      `${plan.contendedBodyMillis} ms body (wait = call to body start)`,
    "",
    Report.contendedTable(results.contended),
    "",
    "## 4. Standalone pool decision: raw node-redis, acquire + release scripts (EVALSHA) per sample, " +
      `${plan.pool.rounds} interleaved rounds`,
    "",
    Report.poolTable(results.pool),
    "",
    "Opening a connection (createClient, connect, first PING):",
    "",
    Report.connectTable(results.pool),
    "",
    `## 5. Renewal: lease ${plan.renewalLeaseMillis} ms, body ${plan.renewalBodyMillis} ms`,
    "",
    Report.renewalTable(results.renewal, plan.renewalBodyMillis, plan.renewalLeaseMillis),
    "",
    "## Ratios",
    "",
    "Lock rows: latency from section 1, throughput from section 2. Raw rows: section 4 at the same concurrency.",
    "",
    Report.ratioTable(results),
    ""
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n")))
})

program.pipe(
  Effect.timeoutOrElse({
    duration: runTimeout,
    orElse: () => Effect.fail(new BenchTimeout({ message: `the bench did not finish within ${runTimeout}` }))
  }),
  NodeRuntime.runMain
)
