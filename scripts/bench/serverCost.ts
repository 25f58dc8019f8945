// What the lock's and the semaphore's protocols cost the server, part by part: an uncontended
// acquire-and-release cycle sent 64 at a time over one node-redis client. For the lock: the
// hand-written baseline (SET NX PX and a compare-and-delete script), the lock's own scripts, and
// variants of them with one part taken out. For the semaphore: redis-semaphore's `Semaphore` (one
// script on a sorted set timed by the client's clock, then ZREM), the `Semaphore`'s scripts, and
// the same without the fencing token. Each table also has two scripts that do nothing with the
// protocol's keys and arguments (what running any script twice costs). The server's CPU (INFO cpu,
// user plus system) is read before and after each run and divided by its cycles. The client's speed
// does not enter the figure: only the server's work per cycle does.
//
// The variants exist only here, to price each part; none of them is a protocol the lock could run
// (without its fencing token, or without the waiter queue's check, it would not be the same lock).
// Run `node --conditions=@sage/source bench/serverCost.ts [--quick]` in scripts/ (after
// `source scripts/toolchain.sh`); progress goes to stderr, the Markdown report to stdout.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { NodeRuntime } from "@effect/platform-node"
import { LockScripts, SemaphoreScripts } from "@sage/lock"
import { RedisServer, type ServerBinary } from "@sage/lock-testkit"
import * as ServerCpuBench from "./serverCpuBench.ts"
import { type Client, type Plan, withScripts } from "./serverCpuBench.ts"
import { compareAndDelete } from "./baselineScripts.ts"
import { lockAcquireCommand, lockReleaseCommand } from "./lockCommands.ts"
import { semaphoreProtocol } from "./semaphoreCommands.ts"
import { parseCpuMicros } from "./peers/counters.ts"
import { scriptSha } from "./scriptSha.ts"
import { median, table } from "./stats.ts"

class ServerCostError extends Data.TaggedError("ServerCostError")<{ readonly message: string }> {}

const usage = `usage: node --conditions=@sage/source bench/serverCost.ts [--quick]
  Starts redis-server 7 and valkey-server 8, then measures the server CPU of one uncontended
  acquire-and-release cycle for the baseline, the lock's protocol and variants of it, and for
  redis-semaphore's semaphore, the Semaphore's protocol and a variant of it, 64 cycles in flight,
  in rotated rounds. About two minutes.`

const full: Plan = { rounds: 5, cycles: 60_000 }
/** A smoke run of the same code paths; its numbers are too few to quote. */
const quick: Plan = { rounds: 2, cycles: 3_000 }

const concurrency = 64
const leaseMillis = "10000"

/** `lua` with `from` replaced by `to`; fails loudly if the scripts no longer contain `from`. */
const without = (lua: string, from: string, to: string): string => {
  if (!lua.includes(from)) throw new Error(`the lock's script no longer contains: ${from}`)
  return lua.replace(from, to)
}

const nothing = "return 1"
const acquireWithoutFence = without(LockScripts.acquire, "return {1, issue_fence()}", "return {1, 1}")
const acquireWithoutQueue = without(
  LockScripts.acquire,
  `local queued = redis.call("EXISTS", KEYS[2]) == 1`,
  "local queued = false"
)
const releaseWithoutQueue = without(LockScripts.release, `if redis.call("EXISTS", KEYS[2]) == 1 then`, "if false then")

/** redis-semaphore's acquire script (v5, `semaphore/acquire/lua`): expiry by the client's clock. */
const redisSemaphoreAcquire = `local key = KEYS[1]
local limit = tonumber(ARGV[1])
local identifier = ARGV[2]
local lockTimeout = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local expiredTimestamp = now - lockTimeout
redis.call('zremrangebyscore', key, '-inf', expiredTimestamp)
if redis.call('zcard', key) < limit then
  redis.call('zadd', key, now, identifier)
  redis.call('pexpire', key, lockTimeout)
  return 1
else
  return 0
end`
/** The semaphore's acquire with its fast path's fencing token (the lines from `from` to `to`) taken out. */
const semaphoreAcquireWithoutFence = ((from: string, to: string): string => {
  const lua = SemaphoreScripts.acquire
  const start = lua.indexOf(from)
  const end = lua.indexOf(to)
  if (start < 0 || end < start) throw new Error(`the semaphore's script no longer contains: ${from} ... ${to}`)
  return `${lua.slice(0, start)}local f = 1\n${lua.slice(end)}`
})('local floor = t[1] .. string.rep("0", 6 - #t[2]) .. t[2]', 'redis.call("DEL", KEYS[5])')
const semaphoreLimit = 4
const semaphore = semaphoreProtocol(semaphoreLimit)

const scripts = [
  LockScripts.acquire,
  LockScripts.release,
  compareAndDelete,
  nothing,
  acquireWithoutFence,
  acquireWithoutQueue,
  releaseWithoutQueue,
  ...semaphore.scripts,
  redisSemaphoreAcquire,
  semaphoreAcquireWithoutFence
]

/** `cmd` with the script `lua` in place of the lock's own (same KEYS and ARGV). */
const swap = (cmd: Array<string>, lua: string): Array<string> => [cmd[0]!, scriptSha(lua), ...cmd.slice(2)]

interface Variant {
  readonly name: string
  readonly acquire: (key: string, token: string) => Array<string>
  readonly release: (key: string, token: string) => Array<string>
}

const lockAcquire = (key: string, token: string) => lockAcquireCommand(key, token, leaseMillis)

const lockVariants: ReadonlyArray<Variant> = [
  {
    name: "baseline: SET NX PX, then a compare-and-delete script",
    acquire: (key, token) => ["SET", key, token, "NX", "PX", leaseMillis],
    release: (key, token) => ["EVALSHA", scriptSha(compareAndDelete), "1", key, token]
  },
  {
    name: "two scripts that only `return 1` (the lock's KEYS and ARGV)",
    acquire: (key, token) => swap(lockAcquire(key, token), nothing),
    release: (key, token) => swap(lockReleaseCommand(key, token), nothing)
  },
  { name: "@sage/lock's protocol", acquire: lockAcquire, release: lockReleaseCommand },
  {
    name: "  without the fencing token on acquire",
    acquire: (key, token) => swap(lockAcquire(key, token), acquireWithoutFence),
    release: lockReleaseCommand
  },
  {
    name: "  without the waiter-queue check on acquire",
    acquire: (key, token) => swap(lockAcquire(key, token), acquireWithoutQueue),
    release: lockReleaseCommand
  },
  {
    name: "  without the waiter-queue check on release",
    acquire: lockAcquire,
    release: (key, token) => swap(lockReleaseCommand(key, token), releaseWithoutQueue)
  }
]

const semaphoreAcquire = (key: string, token: string) => semaphore.acquire(key, token, leaseMillis)

const semaphoreVariants: ReadonlyArray<Variant> = [
  {
    name: "redis-semaphore's `Semaphore`: its script, then ZREM",
    acquire: (key, token) => [
      "EVALSHA",
      scriptSha(redisSemaphoreAcquire),
      "1",
      key,
      String(semaphoreLimit),
      token,
      leaseMillis,
      String(Date.now())
    ],
    release: (key, token) => ["ZREM", key, token]
  },
  {
    name: "two scripts that only `return 1` (the `Semaphore`'s KEYS and ARGV)",
    acquire: (key, token) => swap(semaphoreAcquire(key, token), nothing),
    release: (key, token) => swap(semaphore.release(key, token), nothing)
  },
  { name: "@sage/lock's `Semaphore` protocol", acquire: semaphoreAcquire, release: semaphore.release },
  {
    name: "  without the fencing token on acquire",
    acquire: (key, token) => swap(semaphoreAcquire(key, token), semaphoreAcquireWithoutFence),
    release: semaphore.release
  }
]

/** The tables the report prints, each with its own first row as the yardstick of its ratios. */
const tables: ReadonlyArray<{ readonly title: string; readonly variants: ReadonlyArray<Variant> }> = [
  { title: "Locks", variants: lockVariants },
  { title: "Semaphores (1 permit of 4)", variants: semaphoreVariants }
]

const serverCpuMicros = async (client: Client): Promise<number> => parseCpuMicros(await client.info("cpu"))

/** Runs `cycles` cycles of `variant`, `concurrency` at a time; answers server CPU us per cycle. */
const measure = async (client: Client, variant: Variant, cycles: number, round: number): Promise<number> => {
  let started = 0
  let failed = 0
  const before = await serverCpuMicros(client)
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      const key = LockScripts.lockKey("bench-server-cost", `r${round}:w${worker}`)
      while (started < cycles) {
        const token = `t${started++}`
        const acquired: unknown = await client.sendCommand(variant.acquire(key, token))
        const released: unknown = await client.sendCommand(variant.release(key, token))
        // Every cycle must really take and free the key, or the figure prices something else.
        const took = acquired === "OK" || acquired === 1 || (Array.isArray(acquired) && acquired[0] === 1)
        if (!took || released !== 1) failed++
      }
    })
  )
  const after = await serverCpuMicros(client)
  if (failed > 0) throw new Error(`${variant.name}: ${failed} of ${cycles} cycles did not acquire and release`)
  return (after - before) / cycles
}

/** One table's variants in `plan.rounds` rounds, order rotated each round: its Markdown table. */
const measureTable = (client: Client, variants: ReadonlyArray<Variant>, plan: Plan, label: string) =>
  Effect.gen(function* () {
    const perVariant = variants.map((): Array<number> => [])
    const ratios = variants.map((): Array<number> => [])
    for (let round = 0; round < plan.rounds; round++) {
      const order = variants.map((_, i) => (i + round) % variants.length)
      const cost: Array<number> = []
      for (const i of order) {
        cost[i] = yield* Effect.tryPromise({
          try: () => measure(client, variants[i]!, plan.cycles, round),
          catch: (cause) => new ServerCostError({ message: String(cause) })
        })
      }
      for (let i = 0; i < variants.length; i++) {
        perVariant[i]!.push(cost[i]!)
        ratios[i]!.push(cost[i]! / cost[0]!)
      }
      process.stderr.write(`${label}: round ${round + 1} of ${plan.rounds} done\n`)
    }
    const rows = variants.map((variant, i) => [
      variant.name,
      perVariant[i]!.length > 0 ? median(perVariant[i]!).toFixed(2) : "",
      `${Math.min(...perVariant[i]!).toFixed(2)}-${Math.max(...perVariant[i]!).toFixed(2)}`,
      `${median(ratios[i]!).toFixed(2)}x`
    ])
    return table(["server CPU per cycle", "median us", "rounds' range", "to the first row"], rows)
  })

const runOn = (flavor: ServerBinary.Flavor, plan: Plan) =>
  Effect.scoped(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const client = yield* withScripts(server.url, scripts, (message) => new ServerCostError({ message }))
      const parts: Array<string> = []
      for (const { title, variants } of tables) {
        parts.push(`#### ${title}\n\n${yield* measureTable(client, variants, plan, `${flavor}, ${title}`)}`)
      }
      return parts.join("\n\n")
    })
  )

const program = ServerCpuBench.program({
  usage,
  full,
  quick,
  flavors: ["redis7", "valkey8"],
  runOn,
  heading: (plan, load) =>
    `## Server CPU per uncontended cycle\n\n${plan.rounds} rounds of ${plan.cycles} cycles, ${concurrency} in flight, ` +
    `order rotated; 1-minute load ${load.before.toFixed(2)} before, ${load.after.toFixed(2)} after.`
})

NodeRuntime.runMain(program)
