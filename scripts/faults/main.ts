// `npm run faults`: the fault matrix. Runs every scenario (scenarios.ts) on every deployment it
// applies to, on each server flavor, and writes docs/faults.md: one generated table with versions,
// date and running time. Never edit that file by hand; rerun this instead.
//
//   npm run faults                                   # the whole matrix, writes docs/faults.md
//   npm run faults -- --jobs 2                       # two cells at a time
//   npm run faults -- --alternate                    # each scenario x deployment on one flavor, alternating
//   npm run faults -- --scenarios baseline,key-theft --deployments standalone --servers redis7
//   npm run faults -- --scenarios 'semaphore-*'      # a trailing * matches every id with that prefix
//   npm run faults -- --scenarios 'election-*'       # the election cells
//   npm run faults -- --scenarios 'semaphore-*' --servers redis8,valkey9   # on the newer servers
//   npm run faults -- --help                         # this text, and the scenario ids
//   (a filtered run writes nothing unless --out FILE is given)
// FAULTS_DEBUG=1 prints library warnings and timings; FAULTS_LINES=DIR writes every cell's lines to DIR.
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"
import { NodeRuntime } from "@effect/platform-node"
import { ServerBinary } from "@sage/lock-testkit"
import { formatMarkdown } from "../tooling/markdown.ts"
import { deploymentKinds, type DeploymentKind } from "./deployments.ts"
import { idleMillis, type Takeover, takeoverMillis, type TokenViolation } from "./history.ts"
import { renderReport, serverVersions } from "./report.ts"
import { type CellResult, defaultSettings, runCell } from "./run.ts"
import { scenarios } from "./scenarios.ts"

const docsPath = fileURLToPath(new URL("../../docs/faults.md", import.meta.url))

const argument = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}
const list = (name: string): Array<string> | undefined =>
  argument(name)
    ?.split(",")
    .map((s) => s.trim())

/** On a semaphore key: how long the head of the line went without a dead holder's permits after its lease. */
const stuckNote = (takeover: Takeover): string =>
  takeover.stuck === undefined ? "" : `(stuck ${Math.round((takeover.stuck.to - takeover.stuck.from) / 1000)}ms)`

/** On a semaphore key: how many token-order violations grant order explains, when any. */
const grantOrderNote = (violations: ReadonlyArray<TokenViolation> | undefined): string => {
  const explained = violations?.filter((v) => v.inGrantOrder === true).length ?? 0
  return explained === 0 ? "" : `(${explained} in grant order)`
}

/** `--scenarios` entries: an id, or a prefix ending in `*`. */
const matches = (pattern: string, id: string): boolean =>
  pattern.endsWith("*") ? id.startsWith(pattern.slice(0, -1)) : id === pattern

const usage = `npm run faults [-- options]: the fault matrix (scripts/faults). Without a filter it runs every cell and writes docs/faults.md.
  --scenarios a,b,prefix-*   only these scenarios (a trailing * matches every id with that prefix)
  --deployments standalone,ioredis,sentinel,ioredis-sentinel,cluster,ioredis-cluster   (ioredis-*: through the ioredis backend)
  --servers ${ServerBinary.known.join(",")}   only these servers (by default ${ServerBinary.all.join(" and ")}; the newer ones run when named)
  --jobs N                   N cells at a time
  --alternate                each scenario x deployment on one server flavor, the flavors taking turns
  --out FILE                 write the report there (a filtered run writes none otherwise)
Environment: FAULTS_DEBUG=1 prints library warnings and timings; FAULTS_LINES=DIR writes every cell's lines to DIR.
Scenarios: ${scenarios.map((s) => s.id).join(", ")}`

const program = Effect.gen(function* () {
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    console.log(usage)
    return
  }
  const onlyScenarios = list("scenarios")
  const onlyDeployments = list("deployments")
  const onlyServers = list("servers")
  const unknown = (onlyScenarios ?? []).filter((pattern) => !scenarios.some((s) => matches(pattern, s.id)))
  if (unknown.length > 0) return yield* Effect.die(new Error(`unknown scenarios: ${unknown.join(", ")}`))
  const filtered = onlyScenarios !== undefined || onlyDeployments !== undefined || onlyServers !== undefined
  const out = argument("out") ?? (filtered ? undefined : docsPath)
  const unknownServers = (onlyServers ?? []).filter((name) => !ServerBinary.known.some((f) => f === name))
  if (unknownServers.length > 0) return yield* Effect.die(new Error(`unknown servers: ${unknownServers.join(", ")}`))
  const flavors =
    onlyServers === undefined ? ServerBinary.all : ServerBinary.known.filter((f) => onlyServers.includes(f))
  const kinds = deploymentKinds.filter((k) => onlyDeployments === undefined || onlyDeployments.includes(k))
  const cells: Array<{ scenario: (typeof scenarios)[number]; kind: DeploymentKind; flavor: ServerBinary.Flavor }> = []
  // `--alternate`: each scenario x deployment on one flavor, taking turns, so both flavors are covered
  // across the matrix in half the time.
  const alternate = process.argv.includes("--alternate")
  let group = 0
  for (const scenario of scenarios) {
    if (onlyScenarios !== undefined && !onlyScenarios.some((pattern) => matches(pattern, scenario.id))) continue
    for (const kind of kinds) {
      if (!scenario.deployments.includes(kind)) continue
      const chosen = alternate ? [flavors[group % flavors.length] ?? "redis7"] : flavors
      group++
      for (const flavor of chosen) cells.push({ scenario, kind, flavor })
    }
  }
  // Cells are independent (own servers, ports, temp dirs, workers): `--jobs N` runs N at a time.
  const jobs = Math.max(1, Number(argument("jobs") ?? 1))
  const started = Date.now()
  let finished = 0
  const results: Array<CellResult> = yield* Effect.forEach(
    cells,
    (cell) =>
      Effect.tap(runCell(cell.scenario, cell.kind, cell.flavor, defaultSettings), (result) =>
        Effect.sync(() => {
          finished++
          const c = result.counts
          console.log(
            `[${finished}/${cells.length}] ${result.pass ? "PASS" : "FAIL"} ${cell.scenario.id} ${cell.kind} ${cell.flavor} ` +
              `(${(result.millis / 1000).toFixed(1)} s) acq=${c?.acquisitions ?? "-"} timedOut=${c?.timedOut ?? "-"} ` +
              `lost=${c === undefined ? "-" : `${c.lockLost.acquire}/${c.lockLost.renew}/${c.lockLost.release}`} ` +
              `errors=${c?.expectedErrors ?? "-"} ` +
              (cell.scenario.semaphore === true
                ? `overLimit=${c?.overLimit.length ?? "-"}(${c?.overLimit.filter((e) => e.surfaced).length ?? "-"}) ` +
                  `peak=${c?.peakPermits ?? "-"} `
                : `overlaps=${c?.overlaps.length ?? "-"} `) +
              `hangs=${c?.hangs.length ?? "-"} ` +
              `gap=${c?.longestGapMillis ?? "-"}ms wait=${c?.longestWaitMillis ?? "-"}ms left=${result.keysLeft.length} ` +
              `grants=${c?.history.grants ?? "-"} tokens=${c?.history.tokenViolations.length ?? "-"}${grantOrderNote(c?.history.tokenViolations)} ` +
              `ahead=${c?.history.tokensAhead ?? "-"} idle=${idleMillis(c) ?? "-"}ms ` +
              `takeover=${c === undefined ? "-" : c.history.takeovers.map((t) => `${takeoverMillis(t) ?? "none"}ms${stuckNote(t)}`).join("/") || "-"} ` +
              `stranded=${result.strandedRegistrations}` +
              (cell.scenario.election === true
                ? ` observed=${c?.observers?.states ?? "-"}(${c?.observers?.violations.length ?? "-"}) ` +
                  `termsShown=${c?.observers?.termsShown ?? "-"}(${c?.observers?.unreported ?? "-"} unreported)`
                : "")
          )
          for (const note of result.notes) console.log(`    note: ${note}`)
          for (const problem of result.problems.slice(0, 8)) console.log(`    ${problem}`)
          if (process.env["FAULTS_DEBUG"] === "1") {
            for (const log of result.logs) console.log(`    log: ${log}`)
            const idle = c?.history.longestIdle
            if (idle !== undefined) {
              console.log(
                `    idle: ${idle.key} ${(idle.from / 1000).toFixed(1)}..${(idle.to / 1000).toFixed(1)} ms, waiting ${idle.waiting.join(", ")}`
              )
            }
          }
        })
      ),
    { concurrency: jobs }
  )
  // A cell whose deployment would not start or whose fault could not be injected says nothing about
  // the lock: it is run once more, and the table shows that second run (and says how many there were).
  const reruns = results.flatMap((result, i) => (result.harnessFailure ? [i] : []))
  for (const i of reruns) {
    const cell = cells[i]
    if (cell === undefined) continue
    console.log(`rerunning ${cell.scenario.id} ${cell.kind} ${cell.flavor} after a harness failure`)
    results[i] = yield* runCell(cell.scenario, cell.kind, cell.flavor, defaultSettings)
  }
  const totalMillis = Date.now() - started
  const failed = results.filter((r) => !r.pass).length
  console.log(`${results.length} cells, ${failed} failed, ${(totalMillis / 1000).toFixed(0)} s`)
  if (out !== undefined) {
    const versions = yield* serverVersions(flavors)
    Fs.writeFileSync(
      out,
      yield* formatMarkdown(
        renderReport({
          results,
          totalMillis,
          versions,
          settings: defaultSettings,
          date: new Date(),
          filtered,
          jobs,
          alternate,
          reruns: reruns.length
        }),
        out
      )
    )
    console.log(`wrote ${out}`)
  }
  if (failed > 0) process.exitCode = 1
})

NodeRuntime.runMain(program)
