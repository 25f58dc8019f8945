// What it costs the server to keep a semaphore's holders in a sorted set scored with the server's
// time (what `SemaphoreScripts` does, on every server) against hash fields that expire on their own
// (hash-field expiration, Redis 7.4+ and Valkey 9), as the number of holders grows.
//
// Both twins here have the same shape: read the server's time, check the stored limit, count the
// permits in use, take a fencing token, record the holder with its lease; release drops it. The
// sorted set keeps a running count of the permits in use (`=used`), adjusted by every script that adds
// or drops a holder, because each lapsed holder is found by its score and subtracted. Expiring hash
// fields vanish without any script running, so nothing can keep such a count: the hash twin sums the
// live fields on every acquisition (never `HLEN`, which still counts fields that expired but are not
// reclaimed). Neither twin is a protocol the lock runs: they price the choice of structure, nothing
// else.
//
// Each cycle acquires one permit and releases it on a semaphore that already has `holders` other
// holders (long leases), 64 cycles in flight on 64 semaphores; the server's CPU (INFO cpu) is read
// before and after and divided by the cycles.
// Run `node --conditions=@sage/source bench/semaphoreExpiry.ts [--quick]` in scripts/ (after
// `source scripts/toolchain.sh`); progress goes to stderr, the Markdown report to stdout.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { NodeRuntime } from "@effect/platform-node"
import { RedisServer, type ServerBinary } from "@sage/lock-testkit"
import * as ServerCpuBench from "./serverCpuBench.ts"
import { type Client, type Plan, withScripts } from "./serverCpuBench.ts"
import { parseCpuMicros } from "./peers/counters.ts"
import { scriptSha } from "./scriptSha.ts"
import { median, table } from "./stats.ts"

class SemaphoreExpiryError extends Data.TaggedError("SemaphoreExpiryError")<{ readonly message: string }> {}

const usage = `usage: node --conditions=@sage/source bench/semaphoreExpiry.ts [--quick]
  Starts redis-server 8.0 and valkey-server 9.1, then measures the server CPU of one
  acquire-and-release of a permit beside 1 to 1,000 other holders, for holders in a sorted set
  scored with the server's time and for holders in hash fields that expire. About two minutes.`

const full: Plan = { rounds: 3, cycles: 20_000 }
/** A smoke run of the same code paths; its numbers are too few to quote. */
const quick: Plan = { rounds: 1, cycles: 1_000 }

const concurrency = 64
const holderCounts = [1, 10, 100, 1_000] as const
const leaseMillis = "60000"

// KEYS[1] the holders, KEYS[2] the limit and (sorted set only) the permits in use, KEYS[3] the fence.
// ARGV[1] token, ARGV[2] lease (ms), ARGV[3] permits asked, ARGV[4] limit.
const start = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stored = redis.call("HGET", KEYS[2], "=limit")
if stored and stored ~= ARGV[4] then
  return {-1, tonumber(stored)}
end
local lease, count = tonumber(ARGV[2]), tonumber(ARGV[3])
`
const keep = `for _, k in ipairs({KEYS[1], KEYS[2]}) do
  if redis.call("PTTL", k) < lease then
    redis.call("PEXPIRE", k, lease)
  end
end
`

const sortedSetAcquire = `${start}local ended = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now)
for i = 1, #ended do
  local held = redis.call("HGET", KEYS[2], ended[i])
  redis.call("ZREM", KEYS[1], ended[i])
  if held then
    redis.call("HDEL", KEYS[2], ended[i])
    redis.call("HINCRBY", KEYS[2], "=used", -tonumber(string.match(held, "^%d+")))
  end
end
local used = tonumber(redis.call("HGET", KEYS[2], "=used") or "0") or 0
if count > tonumber(ARGV[4]) - used then
  return {0}
end
local f = redis.call("INCR", KEYS[3])
redis.call("ZADD", KEYS[1], now + lease, ARGV[1])
redis.call("HSET", KEYS[2], "=limit", ARGV[4], ARGV[1], count .. ":" .. f)
redis.call("HINCRBY", KEYS[2], "=used", count)
${keep}return {1, f}
`
const sortedSetRelease = `local held = redis.call("HGET", KEYS[2], ARGV[1])
if not held then
  return 0
end
redis.call("ZREM", KEYS[1], ARGV[1])
redis.call("HDEL", KEYS[2], ARGV[1])
redis.call("HINCRBY", KEYS[2], "=used", -tonumber(string.match(held, "^%d+")))
return 1
`

const fieldAcquire = `${start}local live = redis.call("HVALS", KEYS[1])
local used = 0
for i = 1, #live do
  used = used + tonumber(string.match(live[i], "^%d+"))
end
if count > tonumber(ARGV[4]) - used then
  return {0}
end
local f = redis.call("INCR", KEYS[3])
redis.call("HSET", KEYS[1], ARGV[1], count .. ":" .. f)
redis.call("HPEXPIRE", KEYS[1], lease, "FIELDS", 1, ARGV[1])
redis.call("HSET", KEYS[2], "=limit", ARGV[4])
${keep}return {1, f}
`
const fieldRelease = `return redis.call("HDEL", KEYS[1], ARGV[1])
`

interface Twin {
  readonly name: string
  readonly acquire: string
  readonly release: string
}

const twins: ReadonlyArray<Twin> = [
  { name: "sorted set scored with TIME", acquire: sortedSetAcquire, release: sortedSetRelease },
  { name: "hash fields that expire", acquire: fieldAcquire, release: fieldRelease }
]

const keysOf = (twin: number, holders: number, semaphore: number): Array<string> => {
  const tag = `{bench-expiry:${twin}:${holders}:${semaphore}}`
  return [`${tag}:holders`, `${tag}:meta`, `${tag}:fence`]
}

const evalsha = (lua: string, keys: Array<string>, args: Array<string>): Array<string> => [
  "EVALSHA",
  scriptSha(lua),
  String(keys.length),
  ...keys,
  ...args
]

/** `holders` holders of one permit each on every semaphore of `twin`, with long leases. */
const fill = async (client: Client, twin: number, holders: number, limit: string): Promise<void> => {
  for (let semaphore = 0; semaphore < concurrency; semaphore++) {
    const keys = keysOf(twin, holders, semaphore)
    const replies = await Promise.all(
      Array.from({ length: holders }, (_, i) =>
        client.sendCommand(evalsha(twins[twin]!.acquire, keys, [`held${i}`, leaseMillis, "1", limit]))
      )
    )
    if (replies.some((reply) => !Array.isArray(reply) || reply[0] !== 1))
      throw new Error(`${twins[twin]!.name}: could not fill ${holders} holders`)
  }
}

/** Server CPU (us) per acquire-and-release cycle of `twin` beside `holders` others. */
const measure = async (client: Client, twin: number, holders: number, limit: string, cycles: number) => {
  let started = 0
  let failed = 0
  const { acquire, release } = twins[twin]!
  const before = parseCpuMicros(await client.info("cpu"))
  await Promise.all(
    Array.from({ length: concurrency }, async (_, semaphore) => {
      const keys = keysOf(twin, holders, semaphore)
      while (started < cycles) {
        const token = `t${started++}`
        const acquired: unknown = await client.sendCommand(evalsha(acquire, keys, [token, leaseMillis, "1", limit]))
        const released: unknown = await client.sendCommand(evalsha(release, keys, [token]))
        // Every cycle must really take and free a permit, or the figure prices something else.
        if (!Array.isArray(acquired) || acquired[0] !== 1 || released !== 1) failed++
      }
    })
  )
  const after = parseCpuMicros(await client.info("cpu"))
  if (failed > 0) throw new Error(`${twins[twin]!.name}: ${failed} of ${cycles} cycles did not take a permit`)
  return (after - before) / cycles
}

const runOn = (flavor: ServerBinary.Flavor, plan: Plan) =>
  Effect.scoped(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const client = yield* withScripts(
        server.url,
        twins.flatMap((twin) => [twin.acquire, twin.release]),
        (message) => new SemaphoreExpiryError({ message })
      )
      const rows: Array<Array<string>> = []
      for (const holders of holderCounts) {
        const limit = String(holders + 1)
        const costs = twins.map((): Array<number> => [])
        yield* Effect.tryPromise({
          try: async () => {
            for (let twin = 0; twin < twins.length; twin++) await fill(client, twin, holders, limit)
            for (let round = 0; round < plan.rounds; round++)
              for (let i = 0; i < twins.length; i++) {
                const twin = (i + round) % twins.length
                costs[twin]!.push(await measure(client, twin, holders, limit, plan.cycles))
              }
          },
          catch: (cause) => new SemaphoreExpiryError({ message: String(cause) })
        })
        const [sorted, fields] = costs.map(median) as [number, number]
        rows.push([String(holders), sorted.toFixed(1), fields.toFixed(1), `${(fields / sorted).toFixed(2)}x`])
        process.stderr.write(`${flavor}: ${holders} holders done\n`)
      }
      return table(
        ["other holders", "sorted set: us a cycle", "expiring fields: us a cycle", "fields / sorted set"],
        rows
      )
    })
  )

const program = ServerCpuBench.program({
  usage,
  full,
  quick,
  flavors: ["redis8", "valkey9"],
  runOn,
  heading: (plan, load) =>
    `## Semaphore holders: sorted set against expiring hash fields\n\n` +
    `Server CPU of one acquire-and-release cycle, medians of ${plan.rounds} rounds of ${plan.cycles} cycles, ` +
    `${concurrency} in flight, order rotated; 1-minute load ${load.before.toFixed(2)} before, ` +
    `${load.after.toFixed(2)} after.`
})

NodeRuntime.runMain(program)
