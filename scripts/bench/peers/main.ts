// The peers benchmark: the same workloads on @sage/lock, redlock 5, @sesamecare-oss/redlock,
// redis-semaphore's Mutex, a hand-written node-redis baseline and that baseline with @sage/lock's
// scripts (the protocol's floor), against one throwaway loopback Redis 7
// that the test kit starts and kills. Each library runs in worker processes of its own; the libraries
// take turns in a rotated order over several rounds, and every figure is reported as the median of
// per-round ratios against the baseline. Progress goes to stderr, the Markdown report to stdout.
// Run `node bench/peers/main.ts [--quick]` in scripts/ (after `source scripts/toolchain.sh`).
import * as Effect from "effect/Effect"
import { NodeRuntime } from "@effect/platform-node"
import { contendedWorkers, full, holdMillis, type Plan, quick } from "./plan.ts"
import * as Report from "./report.ts"
import { runAll } from "./rounds.ts"
import { withWorkers } from "./session.ts"
import * as Arguments from "../arguments.ts"

const usage = `usage: node bench/peers/main.ts [--quick]
  Starts one loopback redis-server, runs the peers workloads on @sage/lock, redlock 5,
  @sesamecare-oss/redlock, redis-semaphore, a node-redis baseline and that baseline with
  @sage/lock's scripts, and prints Markdown tables to stdout. About 12 minutes; --quick runs every workload and library once with tiny sizes (under a
  minute, a smoke test, not a measurement).`

const runTimeout = (plan: Plan) => (plan.name === "quick" ? "3 minutes" : "18 minutes")

const section = (title: string, body: string): Array<string> => [`### ${title}`, "", body, ""]

const program = Effect.gen(function* () {
  const args = yield* Arguments.parse(usage)
  if (args === undefined) return
  const plan = args.quick ? quick : full
  const ran = yield* withWorkers({
    label: "peers",
    timeout: runTimeout(plan),
    run: (processes, signal, progress) => runAll(plan, processes, signal, progress)
  })
  const collected = ran.result
  const byId = (id: string) => collected.filter((entry) => entry.workload.id === id)
  const lines = [
    `# Peers${plan.name === "quick" ? " (--quick: smoke run, too few samples to quote)" : ""}`,
    "",
    `- ${new Date().toISOString()}, ${ran.seconds} s in total; ${plan.rounds} round(s) of the uncontended and ` +
      `contended workloads (libraries rotated each round), and of the held ones ` +
      plan.held.counts.map(({ count, rounds }) => `${rounds} with ${count} locks`).join(", "),
    ...ran.environment,
    `- lease ${plan.leaseMillis} ms in the uncontended and contended workloads, ${plan.held.leaseMillis} ms ` +
      `in the held ones; windows of ${plan.uncontended.durationMillis} ms (uncontended, after ` +
      `${plan.uncontended.warmupMillis} ms warm-up) and ${plan.contended.durationMillis} ms (contended)`,
    "- every ratio is the median over rounds of (library / baseline in the same round); CPU is user + " +
      "system time of the worker processes (lower is better), server CPU the server process's over the " +
      "run (INFO cpu; the bench's own two INFO calls included), server calls come from INFO commandstats " +
      "and include the commands scripts run",
    "",
    "## Headline: ratios to the node-redis baseline",
    "",
    "Uncontended columns: c1/c64 = concurrency 1/64; c1 on one CPU = the library's process and the server " +
      "both on the first CPU. Contended: 8 workers, 1 ms hold, 10 ms think, " +
      "1p/4p = in 1/4 processes. least/mean and held figures are plain values, not ratios.",
    "",
    Report.headlineTable(collected),
    "",
    "## Workloads",
    "",
    ...byId("uncontended-1").flatMap((entry) => section(entry.workload.title, Report.uncontendedTable(entry))),
    ...byId("uncontended-1-onecpu").flatMap((entry) => section(entry.workload.title, Report.uncontendedTable(entry))),
    ...byId("uncontended-64").flatMap((entry) => section(entry.workload.title, Report.uncontendedTable(entry))),
    ...collected
      .filter((entry) => entry.workload.kind === "contended")
      .flatMap((entry) => section(entry.workload.title, Report.contendedTable(entry))),
    ...section(
      `Held locks: N concurrent calls whose bodies wait, Node CPU over ${plan.held.holdMillis} ms once all are held`,
      Report.heldTable(collected.filter((entry) => entry.workload.kind === "held"))
    ),
    `(${contendedWorkers} contended workers, ${holdMillis} ms hold.)`,
    ""
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n")))
})

program.pipe(NodeRuntime.runMain)
