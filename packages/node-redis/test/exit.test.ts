// A one-shot program that uses the lock exits once its work is done. Nothing the lock leaves behind
// (a renewal scheduler's timer, a sweep, a subscriber or pooled connection, a probe) may keep the
// event loop alive after the program returns and its layer is closed. The in-process suites cannot
// see this: vitest's own process stays alive whatever the lock leaves pending. So each case runs the
// same program in a child process (exitWorker.ts) over one backend or one way of running it, against
// servers started here, and the process must exit within `exitWithinMillis` of its last lock call.
//
// The default lease (30 s) is kept on purpose: a renewal scheduler that outlives its last lease by a
// renewal period (a third of the lease, 10 s) shows as an exit 10 s or more late, far past the bound.
import { assert, describe, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { ClusterTopology, RedisServer, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import { namespace } from "./support.ts"
import type { Case, Target } from "./exitWorker.ts"

const worker = fileURLToPath(new URL("./exitWorker.ts", import.meta.url))

// Every case here exits 40-110 ms after its last lock call (closing the layer takes under 20 ms of
// that). The bound leaves room for a loaded machine (two suites at once on two cores) and is still
// far below a renewal period (10 s).
const exitWithinMillis = 3_000

// A child still running this long after it started is stopped, and its output says what held it.
// Longer than the longest linger seen (two renewal periods, 20 s), so a failure reports the delay.
const childLimitMillis = 40_000

const testTimeoutMillis = 60_000

// What keeps a process alive is the client's, not the server's: one flavor (the first asked for) suffices.
const flavor = ServerBinary.flavorsUnderTest()[0]!

interface Outcome {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  /** The host's monotonic clock (ns) when the child exited. */
  readonly exitedAt: bigint
}

/** Runs the worker for `kind` to its exit (or `childLimitMillis`); interrupted, it kills the child. */
const runWorker = (kind: Case, target: Target): Effect.Effect<Outcome> =>
  Effect.callback<Outcome>((resume) => {
    const child = ChildProcess.spawn(
      process.execPath,
      ["--conditions=@sage/source", worker, kind, JSON.stringify(target)],
      {
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    let stdout = ""
    let stderr = ""
    let exitedAt = 0n
    const limit = setTimeout(() => child.kill("SIGKILL"), childLimitMillis)
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    // The exit itself, not the end of its output streams (`close`), is what the test times.
    child.once("exit", () => (exitedAt = process.hrtime.bigint()))
    child.once("error", (error) => {
      clearTimeout(limit)
      resume(Effect.succeed({ code: null, signal: null, stdout, stderr: `${stderr}\n${error}`, exitedAt }))
    })
    child.once("close", (code, signal) => {
      clearTimeout(limit)
      resume(Effect.succeed({ code, signal, stdout, stderr, exitedAt: exitedAt || process.hrtime.bigint() }))
    })
    return Effect.sync(() => {
      clearTimeout(limit)
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    })
  })

/** The value of the first (or last) line of `output` that starts with `tag`. */
const line = (output: string, tag: string, which: "first" | "last" = "first"): string | undefined => {
  const lines = output.split("\n").filter((text) => text.startsWith(`${tag} `))
  return (which === "first" ? lines[0] : lines.at(-1))?.slice(tag.length + 1)
}

/** Runs the program of `kind` in a child process and asserts that it exits promptly after its work. */
const exitsPromptly = (kind: Case, target: Omit<Target, "namespace">) =>
  Effect.gen(function* () {
    const outcome = yield* runWorker(kind, { namespace: namespace(`exit-${kind}`), ...target })
    const { stdout, stderr } = outcome
    const workEnded = line(stdout, "work-ended")
    const explain = (what: string): string =>
      [
        `${kind}: ${what}`,
        `  exit: ${outcome.code ?? outcome.signal}`,
        `  open while the layer was up: ${line(stdout, "during") ?? "(not reported)"}`,
        `  alive after the program returned: ${line(stdout, "resources") ?? "(not reported)"}`,
        `  still alive at the last report: ${line(stdout, "resources", "last") ?? "(not reported)"}`,
        `  stderr: ${stderr.trim() || "(none)"}`
      ].join("\n")
    assert.isDefined(workEnded, explain("the program did not finish its work"))
    const delayMillis = Number(outcome.exitedAt - BigInt(workEnded!)) / 1e6
    assert.strictEqual(outcome.code, 0, explain("the program failed, or was stopped"))
    assert.isBelow(
      delayMillis,
      exitWithinMillis,
      explain(`exited ${(delayMillis / 1000).toFixed(1)} s after its last lock call (bound ${exitWithinMillis} ms)`)
    )
  })

describe("a one-shot program exits once its lock work is done", () => {
  it.live("over MemoryBackend", () => exitsPromptly("memory", {}), testTimeoutMillis)
})

class Standalone extends Context.Service<Standalone, RedisServer.RedisServer>()(
  "@sage/lock-node-redis/test/exit/Standalone"
) {}
class Sentinel extends Context.Service<Sentinel, SentinelTopology.SentinelTopology>()(
  "@sage/lock-node-redis/test/exit/Sentinel"
) {}
class Cluster extends Context.Service<Cluster, ClusterTopology.ClusterTopology>()(
  "@sage/lock-node-redis/test/exit/Cluster"
) {}

// Long failure detection on the replicated topologies: nothing here should ever trigger a failover.
const StandaloneLive = Layer.effect(Standalone, RedisServer.start({ flavor }))
const SentinelLive = Layer.effect(Sentinel, SentinelTopology.start({ flavor, downAfterMillis: 8_000 }))
const ClusterLive = Layer.effect(Cluster, ClusterTopology.start({ flavor, nodeTimeoutMillis: 8_000 }))

layer(StandaloneLive, { excludeTestServices: true })(`a one-shot program on a ${flavor} server exits`, (it) => {
  const cases: ReadonlyArray<readonly [Case, string]> = [
    ["standalone", "over NodeRedisBackend.layer"],
    ["fromClient", "over layerFromClient, the application closing its client after the program"],
    ["effectRedis", "over EffectRedisBackend (wake-ups on) and NodeRedis.layer"],
    ["managedRuntime", "through a ManagedRuntime of the lock layer, disposed after the program"],
    ["runMain", "through NodeRuntime.runMain"],
    ["ioredis", "over IoredisBackend.layer"],
    ["promiseClient", "through a PromiseClient (locks, permits, a lead, an observer), closed after its calls"]
  ]
  for (const [kind, label] of cases) {
    it.effect(
      label,
      () =>
        Effect.gen(function* () {
          const server = yield* Standalone
          yield* exitsPromptly(kind, { url: server.url })
        }),
      testTimeoutMillis
    )
  }
})

layer(SentinelLive, { excludeTestServices: true })(`a one-shot program through ${flavor} Sentinel exits`, (it) => {
  it.effect(
    "over NodeRedisBackend.layerSentinel",
    () =>
      Effect.gen(function* () {
        const topology = yield* Sentinel
        yield* exitsPromptly("sentinel", { sentinel: { name: topology.masterName, sentinels: topology.sentinelNodes } })
      }),
    testTimeoutMillis
  )
  it.effect(
    "over IoredisBackend.layer with sentinels",
    () =>
      Effect.gen(function* () {
        const topology = yield* Sentinel
        yield* exitsPromptly("ioredisSentinel", {
          sentinel: { name: topology.masterName, sentinels: topology.sentinelNodes }
        })
      }),
    testTimeoutMillis
  )
})

layer(ClusterLive, { excludeTestServices: true })(`a one-shot program on a ${flavor} Cluster exits`, (it) => {
  it.effect(
    "over NodeRedisBackend.layerCluster",
    () =>
      Effect.gen(function* () {
        const topology = yield* Cluster
        yield* exitsPromptly("cluster", {
          rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
        })
      }),
    testTimeoutMillis
  )
  it.effect(
    "over IoredisBackend.layerCluster",
    () =>
      Effect.gen(function* () {
        const topology = yield* Cluster
        yield* exitsPromptly("ioredisCluster", {
          rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
        })
      }),
    testTimeoutMillis
  )
})
