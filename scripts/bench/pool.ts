// The standalone pool decision, measured with raw node-redis (no Effect, no @sage/lock code in the
// timed path): the lock's acquire and release scripts (`LockScripts`, by EVALSHA) over
//   - one shared client, whose concurrent commands node-redis pipelines on one socket, versus
//   - a pool of dedicated clients, where each lock operation takes a client, runs its script and
//     gives the client back (what the replicated backends do, minus ROLE and WAIT).
// Scenarios run in interleaved rounds, so a burst of load from elsewhere hits every scenario alike.
// Also: what a pool pays when it must open a connection (connect, handshake, first command).
import * as Crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as Data from "effect/Data"
import { LockScripts } from "@sage/lock"
import { createClient } from "redis"
import { lockAcquireCommand, lockGranted, lockReleaseCommand, lockScriptShas } from "./lockCommands.ts"
import { now, rate, type Summary, summarize } from "./stats.ts"

type Client = ReturnType<typeof createClient>

/** The raw-client section failed (a connection or an unexpected script reply). */
export class PoolBenchError extends Data.TaggedError("PoolBenchError")<{ readonly message: string }> {}

const leaseMillis = "10000"

const connect = async (url: string): Promise<Client> => {
  const client: Client = createClient({ url })
  // Errors reach the awaiting command; without a listener node-redis would also throw them globally.
  client.on("error", () => {})
  await client.connect()
  return client
}

/** One lock operation on a connection: a script and its reply. */
type Run = (args: ReadonlyArray<string>) => Promise<unknown>

/** acquire (must succeed: every key is fresh) then release, as one sample. */
const lockRoundTrip = async (run: Run, key: string): Promise<void> => {
  const token = Crypto.randomUUID()
  const acquired = await run(lockAcquireCommand(key, token, leaseMillis))
  if (!lockGranted(acquired)) throw new Error(`acquire ${key}: ${JSON.stringify(acquired)}`)
  const released = await run(lockReleaseCommand(key, token))
  if (released !== 1) throw new Error(`release ${key}: ${JSON.stringify(released)}`)
}

/** A fixed set of open connections; `use` waits (FIFO) when all are taken. */
const makePool = (clients: ReadonlyArray<Client>): Run => {
  const idle = [...clients]
  const waiting: Array<(client: Client) => void> = []
  const give = (client: Client): void => {
    const next = waiting.shift()
    if (next === undefined) idle.push(client)
    else next(client)
  }
  return async (args) => {
    const client = idle.pop() ?? (await new Promise<Client>((resolve) => waiting.push(resolve)))
    try {
      return await client.sendCommand([...args])
    } finally {
      give(client)
    }
  }
}

interface Scenario {
  readonly mode: "shared" | "pool"
  /** Open connections the operations use (1 for shared). */
  readonly connections: number
  readonly concurrency: number
  readonly iterations: number
  readonly run: Run
}

interface Collected {
  readonly samples: Array<number>
  elapsedMillis: number
}

/** `concurrency` workers pull the next operation index until `count` operations are done. */
const drive = async (scenario: Scenario, count: number, prefix: string, into: Collected | undefined): Promise<void> => {
  let next = 0
  const start = now()
  await Promise.all(
    Array.from({ length: scenario.concurrency }, async () => {
      while (next < count) {
        const i = next++
        const before = now()
        await lockRoundTrip(scenario.run, `${prefix}:${i}`)
        into?.samples.push(now() - before)
      }
    })
  )
  if (into !== undefined) into.elapsedMillis += now() - start
}

export interface PoolRow {
  readonly mode: "shared" | "pool"
  readonly connections: number
  readonly concurrency: number
  readonly total: Summary
  readonly opsPerSecond: number
}

export interface PoolResult {
  readonly rows: ReadonlyArray<PoolRow>
  /** Connect, handshake and a first PING on a fresh client. */
  readonly connect: Summary
}

export interface PoolOptions {
  readonly url: string
  readonly prefix: string
  readonly rounds: number
  readonly sequentialIterations: number
  readonly concurrentIterations: number
  readonly warmup: number
  readonly connects: number
}

const measure = async (options: PoolOptions): Promise<PoolResult> => {
  const opened: Array<Client> = []
  const open = async (url: string): Promise<Client> => {
    const client = await connect(url)
    opened.push(client)
    return client
  }
  try {
    const shared = await open(options.url)
    const loaded = await shared.sendCommand(["SCRIPT", "LOAD", LockScripts.acquire])
    await shared.sendCommand(["SCRIPT", "LOAD", LockScripts.release])
    if (String(loaded) !== lockScriptShas.acquire)
      throw new Error(`SCRIPT LOAD returned ${String(loaded)}, expected ${lockScriptShas.acquire}`)
    const dedicated = await Promise.all(Array.from({ length: 16 }, () => open(options.url)))
    const sharedRun: Run = (args) => shared.sendCommand([...args])
    const seq = options.sequentialIterations
    const conc = options.concurrentIterations
    const scenarios: ReadonlyArray<Scenario> = [
      { mode: "shared", connections: 1, concurrency: 1, iterations: seq, run: sharedRun },
      { mode: "pool", connections: 16, concurrency: 1, iterations: seq, run: makePool(dedicated) },
      { mode: "shared", connections: 1, concurrency: 16, iterations: conc, run: sharedRun },
      { mode: "pool", connections: 16, concurrency: 16, iterations: conc, run: makePool(dedicated) },
      // The library's default pool size (10 per node), so some operations wait for a connection.
      { mode: "pool", connections: 10, concurrency: 16, iterations: conc, run: makePool(dedicated.slice(0, 10)) }
    ]
    const collected: Array<Collected> = scenarios.map(() => ({ samples: [], elapsedMillis: 0 }))
    for (const [s, scenario] of scenarios.entries()) {
      await drive(scenario, options.warmup, `${options.prefix}:warm:${s}`, undefined)
    }
    for (let round = 0; round < options.rounds; round++) {
      for (const [s, scenario] of scenarios.entries()) {
        const count = Math.ceil(scenario.iterations / options.rounds)
        await drive(scenario, count, `${options.prefix}:${s}:${round}`, collected[s])
      }
    }
    const connects: Array<number> = []
    for (let i = 0; i < options.connects; i++) {
      const before = now()
      const client = await connect(options.url)
      await client.sendCommand(["PING"])
      connects.push(now() - before)
      client.destroy()
    }
    return {
      rows: scenarios.map((scenario, s) => ({
        mode: scenario.mode,
        connections: scenario.connections,
        concurrency: scenario.concurrency,
        total: summarize(collected[s]!.samples),
        opsPerSecond: rate(collected[s]!.samples.length, collected[s]!.elapsedMillis)
      })),
      connect: summarize(connects)
    }
  } finally {
    for (const client of opened) if (client.isOpen) client.destroy()
  }
}

/** The whole raw-client section against one standalone server. */
export const poolDecision = (options: PoolOptions): Effect.Effect<PoolResult, PoolBenchError> =>
  Effect.tryPromise({
    try: () => measure(options),
    catch: (cause) => new PoolBenchError({ message: `raw node-redis section failed: ${String(cause)}` })
  })
