// `npm run soak`: the soak and load run. Scenario A puts 1,000 waiters in 4 processes on one key for
// a minute, scenario B holds 10,000 locks in one process for a minute, each on a fresh standalone
// server; every figure (counts, keys left, fibers and handles before and after, heap, RSS, CPU,
// server connections) goes into docs/soak.md, generated: never edit it by hand, rerun this instead.
//
//   npm run soak                                  # both scenarios, 60 s each, redis7; writes docs/soak.md
//   npm run soak -- --servers redis7,valkey8      # on both server flavors
//   npm run soak -- --seconds 120                 # longer
//   npm run soak -- --quick                       # a 5 s smoke run with a tenth of the load; writes nothing
//   npm run soak -- --scenarios B --servers valkey8   # one scenario; writes nothing
//   npm run soak -- --scenarios B --burst             # B acquiring all 10,000 locks at once (docs/soak.md, Findings)
//   (--out FILE writes the report there instead; a --quick, --scenarios or --burst run writes only with --out)
//
// Exits non-zero when a scenario fails (verdict.ts).
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"
import { NodeRuntime } from "@effect/platform-node"
import { ServerBinary } from "@sage/lock-testkit"
import { serverVersions } from "../faults/report.ts"
import { formatMarkdown } from "../tooling/markdown.ts"
import { renderReport } from "./report.ts"
import { runScenario } from "./run.ts"
import { fullPlan, quickPlan } from "./scenarios.ts"
import { figures, problems } from "./verdict.ts"

const docsPath = fileURLToPath(new URL("../../docs/soak.md", import.meta.url))

const usage = `usage: npm run soak -- [--seconds N] [--quick] [--servers redis7,valkey8] [--scenarios A,B] [--burst] [--out FILE]`

const argument = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

const program = Effect.gen(function* () {
  const known = new Set(["--seconds", "--quick", "--servers", "--scenarios", "--burst", "--out"])
  const unknown = process.argv
    .slice(2)
    .filter((arg, i, all) => (arg.startsWith("--") ? !known.has(arg) : !known.has(all[i - 1] ?? "")))
  if (unknown.length > 0) return yield* Effect.die(new Error(`unknown arguments: ${unknown.join(" ")}\n${usage}`))
  const quick = process.argv.includes("--quick")
  const burst = process.argv.includes("--burst")
  const seconds = Number(argument("seconds") ?? (quick ? 5 : 60))
  if (!(Number.isFinite(seconds) && seconds >= 2))
    return yield* Effect.die(new Error(`--seconds: at least 2\n${usage}`))
  const servers = (argument("servers") ?? "redis7").split(",").map((s) => s.trim())
  const flavors = ServerBinary.all.filter((flavor) => servers.includes(flavor))
  if (flavors.length !== servers.length)
    return yield* Effect.die(new Error(`--servers: one of ${ServerBinary.all.join(", ")}`))
  const only = argument("scenarios")
    ?.split(",")
    .map((s) => s.trim())
  // A subset (--quick, --scenarios) writes a report only where --out says.
  const out = argument("out") ?? (quick || burst || only !== undefined ? undefined : docsPath)
  const plan = quick ? quickPlan(seconds, burst) : fullPlan(seconds, burst)
  const runId = Crypto.randomUUID().slice(0, 8)
  const date = new Date()
  const runs = []
  for (const flavor of flavors) {
    for (const scenario of plan.scenarios.filter((s) => only === undefined || only.includes(s.id))) {
      console.log(`[soak] scenario ${scenario.id} on ${flavor}: ${scenario.title}, ${seconds} s`)
      const run = yield* runScenario(scenario, flavor, plan, runId)
      const f = figures(run)
      const found = problems(run, f)
      const c = f.counts
      console.log(
        `[soak] ${found.length === 0 ? "PASS" : "FAIL"} ${scenario.id} ${flavor} (${(run.millis / 1000).toFixed(0)} s): ` +
          `calls=${c.calls} acquisitions=${c.acquisitions} timedOut=${c.timedOut} lockLost=${c.lockLost} ` +
          `keysLeft=${run.keysLeft.others.length} fences=${run.keysLeft.fences} maxClients=${f.maxClients} ` +
          `opened=${f.connectionsOpened}`
      )
      for (const p of f.processes) {
        console.log(
          `[soak]   worker ${p.worker}: heap ${(p.heap.start / 2 ** 20).toFixed(1)}..${(p.heap.max / 2 ** 20).toFixed(1)} MiB ` +
            `slope ${(p.heap.slopePerMinute / 2 ** 20).toFixed(2)} MiB/min, reachable ${(p.beforeLoad.heapUsed / 2 ** 20).toFixed(1)}` +
            `/${(p.earlyLoad.heapUsed / 2 ** 20).toFixed(1)}/${(p.lateLoad.heapUsed / 2 ** 20).toFixed(1)}/${(p.afterLoad.heapUsed / 2 ** 20).toFixed(1)} MiB, ` +
            `fibers ${p.beforeLoad.liveFibers}->${p.afterLoad.liveFibers}, cpu ${p.cpu.mean.toFixed(0)}%, stop ${p.stopMillis} ms, exit +${p.exitedAfterMillis} ms`
        )
      }
      for (const w of run.workers)
        for (const log of w.logs.slice(0, 3)) console.log(`[soak]   worker ${w.worker} log: ${log}`)
      for (const problem of found) console.log(`[soak]   ${problem}`)
      runs.push({ run, figures: f, problems: found })
    }
  }
  const failed = runs.filter((r) => r.problems.length > 0).length
  console.log(`[soak] ${runs.length} runs, ${failed} failed`)
  if (out !== undefined) {
    const versions = yield* serverVersions(flavors)
    Fs.writeFileSync(out, yield* formatMarkdown(renderReport({ runs, versions, date, quick, seconds }), out))
    console.log(`[soak] wrote ${out}`)
  }
  if (failed > 0) process.exitCode = 1
})

NodeRuntime.runMain(program)
