// The semaphores benchmark: @sage/lock's `Semaphore`, redis-semaphore's `Semaphore` and
// `MultiSemaphore`, the `Semaphore`'s scripts sent raw, and a hand-written node-redis baseline semaphore
// (drivers.ts), on the peers bench's machinery (bench/peers): one throwaway loopback Redis 7, each
// library in worker processes of its own, the libraries rotated over several rounds, every ratio the
// median of per-round ratios to the baseline, server calls and CPU from INFO commandstats and INFO cpu. Workloads: uncontended loops on keys of 4
// permits (1 and 64 at once); 16 workers on one key of 4 permits in 1 and in 4 processes, with the
// count of moments more than 4 bodies were inside (must be 0); 10,000 held permits on 100 keys of 100.
// Progress goes to stderr, the Markdown report to stdout.
// Run `npm run bench:semaphores [-- --quick]` at the root, or `node --conditions=@sage/source
// bench/semaphores/main.ts [--quick]` in scripts/ (after `source scripts/toolchain.sh`).
import * as Effect from "effect/Effect"
import { NodeRuntime } from "@effect/platform-node"
import * as Arguments from "../arguments.ts"
import { runSchedule } from "../peers/rounds.ts"
import { withWorkers } from "../peers/session.ts"
import { semaphoreFigures } from "./analysis.ts"
import { cheap, expensive, full, libraries, libraryLabel, type Plan, quick, runs } from "./plan.ts"
import * as Report from "./report.ts"

const usage = `usage: node bench/semaphores/main.ts [--quick]
  Starts one loopback redis-server, runs the semaphore workloads on @sage/lock's Semaphore,
  redis-semaphore's Semaphore and MultiSemaphore, the Semaphore's scripts sent raw and a node-redis
  baseline semaphore, and prints
  Markdown tables to stdout. About 5 minutes; --quick runs every workload and library once with tiny
  sizes (under a minute, a smoke test, not a measurement).`

const runTimeout = (plan: Plan) => (plan.name === "quick" ? "3 minutes" : "15 minutes")

const section = (title: string, body: string): Array<string> => [`### ${title}`, "", body, ""]

const program = Effect.gen(function* () {
  const args = yield* Arguments.parse(usage)
  if (args === undefined) return
  const plan = args.quick ? quick : full
  const ran = yield* withWorkers({
    label: "semaphores",
    drivers: new URL("./drivers.ts", import.meta.url).href,
    timeout: runTimeout(plan),
    run: (processes, signal, progress) =>
      runSchedule(
        {
          label: "semaphores",
          libraries,
          libraryLabel,
          rounds: plan.rounds,
          cheap: cheap(plan),
          expensive: expensive(plan),
          figures: semaphoreFigures,
          runs
        },
        processes,
        signal,
        progress
      )
  })
  const tables = ran.result.flatMap((entry) =>
    section(
      entry.workload.title,
      entry.workload.kind === "uncontended"
        ? Report.uncontendedTable(entry)
        : entry.workload.kind === "contended"
          ? Report.contendedTable(entry)
          : Report.heldTable(entry)
    )
  )
  const lines = [
    `# Semaphores${plan.name === "quick" ? " (--quick: smoke run, too few samples to quote)" : ""}`,
    "",
    `- ${new Date().toISOString()}, ${ran.seconds} s in total; ${plan.rounds} round(s) of the uncontended and ` +
      `contended workloads (libraries rotated each round), ${plan.held.rounds} of the held one`,
    ...ran.environment,
    `- lease ${plan.leaseMillis} ms in the uncontended and contended workloads, ${plan.held.leaseMillis} ms in ` +
      `the held one; windows of ${plan.uncontended.durationMillis} ms (uncontended, after ` +
      `${plan.uncontended.warmupMillis} ms warm-up) and ${plan.contended.durationMillis} ms (contended); every ` +
      "call takes 1 permit (MultiSemaphore: `permits` 1)",
    "- every ratio is the median over rounds of (library / node-redis baseline in the same round); CPU is " +
      "user + system time of the worker processes, server CPU the server process's over the run (INFO cpu); " +
      "server calls come from INFO commandstats and include the commands scripts run, requests/acq counts " +
      "the commands the clients wrote",
    "- contended: handoff runs from a release that left the semaphore full while a worker waited to the " +
      "next such waiter's body start; least/mean is the least-served worker's acquisitions over the mean; " +
      "over the limit counts the moments more bodies than the limit were inside at once (must be 0), on " +
      "the host's monotonic clock that every process reads",
    "- no semaphore: the contended workloads' workers with no semaphore at all (hold, think, nothing else), " +
      "the most any semaphore could reach there; its 'over the limit' counts how often more than the limit " +
      "were inside with nothing to stop them",
    "- the semaphore protocol, raw: the baseline's loop sending the `Semaphore`'s own scripts, none of its " +
      "client code (the floor of what it could reach with its protocol); like the baseline it polls a full " +
      "semaphore instead of waiting in its line",
    "",
    ...tables
  ]
  yield* Effect.sync(() => process.stdout.write(lines.join("\n")))
})

program.pipe(NodeRuntime.runMain)
