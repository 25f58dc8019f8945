// The pause demo: why fencing tokens exist. A holder process reads the balance under the lock and
// sends its deposit on its way; while the deposit is in flight the process is frozen (SIGSTOP) for
// longer than its lease. The lock passes to another client, which deposits too. Then the frozen
// process resumes and its stale deposit arrives. Run twice: without fencing the stale write
// overwrites the other deposit (a lost update); with fencing (`FencedWrite.set` and the lease's
// fencing token) it is rejected and the balance stays exact. Exits 0 only if the fenced run is exact.
//
// `npm run demo:pause` at the repo root, or `node --conditions=@sage/source demo/pause.ts` here
// (DEMO_SERVER=valkey8 for Valkey). The frozen holder is this same file run with `--holder`.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import { fileURLToPath } from "node:url"
import { Lease, Lock } from "@sage/lock"
import { FencedWrite, NodeRedisBackend } from "@sage/lock-node-redis"
import { RedisServer, type ServerBinary } from "@sage/lock-testkit"
import { createClient } from "redis"

const leaseMillis = 1_000
/** How long the deposit is in flight: the holder is frozen within this window (generous, for loaded machines). */
const inFlightMillis = 1_000
const deposit = 100

type Mode = "unfenced" | "fenced"

interface Setup {
  readonly url: string
  readonly namespace: string
  readonly balanceKey: string
  readonly mode: Mode
}

const lockLayer = (setup: Setup) =>
  Lock.layer({ namespace: setup.namespace, leaseDuration: leaseMillis }).pipe(
    Layer.provide(NodeRedisBackend.layer({ url: setup.url }))
  )

const connect = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(() => {
      const client = createClient({ url })
      client.on("error", () => {})
      return client.connect()
    }),
    (client) => Effect.promise(() => client.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )

type Client = Effect.Success<ReturnType<typeof connect>>

/** One deposit under the lock: read, then write `read + deposit`, fenced or not. */
const depositOnce = (
  client: Client,
  setup: Setup,
  onRead: (balance: number, token: number) => Effect.Effect<void>,
  inFlight: Effect.Effect<void>,
  onWrite: (outcome: "written" | "rejected") => Effect.Effect<void> = () => Effect.void
): Effect.Effect<"written" | "rejected", never, Lease.Lease> =>
  Effect.gen(function* () {
    const lease = yield* Lease.Lease
    const balance = Number((yield* Effect.promise(() => client.get(setup.balanceKey))) ?? "0")
    yield* onRead(balance, lease.fencingToken)
    const value = String(balance + deposit)
    const write: Effect.Effect<"written" | "rejected"> =
      setup.mode === "fenced"
        ? Effect.map(
            Effect.orDie(FencedWrite.set(client, { key: setup.balanceKey, value, fencingToken: lease.fencingToken })),
            (result) => (result._tag === "Written" ? "written" : "rejected")
          )
        : Effect.as(
            Effect.promise(() => client.set(setup.balanceKey, value)),
            "written"
          )
    // Once sent, a write cannot be called back: the lock's loss can no longer stop it.
    return yield* Effect.uninterruptible(
      Effect.flatMap(Effect.andThen(inFlight, write), (outcome) => Effect.as(onWrite(outcome), outcome))
    )
  })

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

/** The holder process: one deposit, reporting each step as a line on stdout. */
const holder = (setup: Setup): Effect.Effect<void, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const client = yield* connect(setup.url)
    const outcome = yield* depositOnce(
      client,
      setup,
      (balance, token) => say(`read ${balance} ${token}`),
      Effect.sleep(inFlightMillis),
      (written) => say(`write ${written}`)
    ).pipe(Lock.withLock("account", { waitTimeout: "5 seconds" }), Effect.provide(lockLayer(setup)), Effect.result)
    yield* say(`end ${outcome._tag === "Success" ? "ok" : String((outcome.failure as { _tag?: string })._tag)}`)
  })

interface RunReport {
  readonly mode: Mode
  readonly balance: number
  readonly completed: number
  readonly lines: ReadonlyArray<string>
}

/** One run: the frozen holder and the next holder, on fresh keys. */
const run = (url: string, mode: Mode): Effect.Effect<RunReport, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const id = globalThis.crypto.randomUUID().slice(0, 8)
    const setup: Setup = { url, namespace: `pause-${id}`, balanceKey: `{account-${id}}:balance`, mode }
    const client = yield* connect(url)
    yield* Effect.promise(() => client.set(setup.balanceKey, "0"))
    const lines: Array<string> = []
    const narrate = (line: string) =>
      Effect.sync(() => {
        lines.push(line)
        process.stdout.write(`  [${mode}] ${line}\n`)
      })
    let completed = 0
    const child = ChildProcess.spawn(
      process.execPath,
      ["--conditions=@sage/source", fileURLToPath(import.meta.url), "--holder", JSON.stringify(setup)],
      { stdio: ["ignore", "pipe", "inherit"] }
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))
    const holderLines: Array<string> = []
    const exited = new Promise<void>((resolve) => child.once("close", () => resolve()))
    const read = new Promise<string>((resolve) => {
      let buffer = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        buffer += chunk
        let newline = buffer.indexOf("\n")
        while (newline >= 0) {
          const line = buffer.slice(0, newline)
          buffer = buffer.slice(newline + 1)
          holderLines.push(line)
          if (line.startsWith("read ")) resolve(line)
          newline = buffer.indexOf("\n")
        }
      })
    })
    const first = yield* Effect.promise(() => read)
    child.kill("SIGSTOP")
    yield* narrate(
      `holder A (pid ${child.pid}) ${first.replace("read", "read balance").replace(/ (\d+)$/, ", token $1")}`
    )
    yield* narrate(`A is frozen (SIGSTOP) with its deposit in flight; its ${leaseMillis} ms lease runs out`)
    const b = yield* depositOnce(
      client,
      setup,
      (balance, token) => narrate(`holder B takes the lock: read balance ${balance}, token ${token}`),
      Effect.void
    ).pipe(Lock.withLock("account", { waitTimeout: "10 seconds" }), Effect.provide(lockLayer(setup)))
    if (b === "written") completed++
    yield* narrate(`B deposited ${deposit}: balance ${yield* Effect.promise(() => client.get(setup.balanceKey))}`)
    child.kill("SIGCONT")
    yield* narrate("A resumes (SIGCONT): its deposit arrives")
    yield* Effect.promise(() => exited)
    for (const line of holderLines.slice(1)) yield* narrate(`A: ${line}`)
    if (holderLines.includes("write written")) completed++
    const balance = Number(yield* Effect.promise(() => client.get(setup.balanceKey)))
    return { mode, balance, completed, lines }
  })

const main = Effect.gen(function* () {
  const flavor: ServerBinary.Flavor = process.env["DEMO_SERVER"] === "valkey8" ? "valkey8" : "redis7"
  const server = yield* RedisServer.start({ flavor })
  process.stdout.write(`@sage/lock pause demo (${flavor}): a holder frozen longer than its lease\n`)
  const exact: Record<Mode, boolean> = { unfenced: false, fenced: false }
  for (const mode of ["unfenced", "fenced"] as const) {
    process.stdout.write(`\n${mode === "fenced" ? "with" : "without"} fencing:\n`)
    const report = yield* run(server.url, mode)
    exact[mode] = report.balance === report.completed * deposit
    process.stdout.write(
      `  balance ${report.balance}, ${report.completed} deposit(s) of ${deposit} accepted: ` +
        (exact[mode] ? "exact" : `LOST UPDATE (expected ${report.completed * deposit})`) +
        "\n"
    )
  }
  process.stdout.write(
    `\nfenced run: ${exact.fenced ? "exact, the stale write was rejected" : "NOT exact"}; ` +
      `unfenced run: ${exact.unfenced ? "exact (the pause missed the write this time)" : "lost an update"}\n`
  )
  if (!exact.fenced) process.exitCode = 1
})

const argv = process.argv.slice(2)
const program: Effect.Effect<void, unknown, Scope.Scope> =
  argv[0] === "--holder" ? holder(JSON.parse(argv[1]!) as Setup) : main

Effect.runPromise(Effect.scoped(program)).then(
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    process.stderr.write(`pause demo failed: ${String(error)}\n`)
    process.exit(2)
  }
)
