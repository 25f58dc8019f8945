// What the Promise API costs over the Effect call it runs: uncontended `client.using(key, ...,
// async () => {})` from async code beside the same call from an Effect program, one call at a time
// (c1) and 64 loops at once on keys of their own (c64), against one Redis 7 server, in rounds that
// take turns (the order rotated), each side over its own backend. The Effect program runs it twice:
// with the same async function as its body (`Effect.tryPromise((signal) => work(signal))`, what an
// Effect program whose work is a Promise writes: the Promise API's overhead is measured against
// this), and with `Effect.void` (what an async body costs on top). The report gives each side's
// median cycles a second and the median ratios.
// `npm run bench:promise [-- --quick]` at the repository root; the Markdown report goes to stdout.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { Lock, PromiseClient } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import { RedisServer } from "@sage/lock-testkit"
import { load1, median, now, table } from "../stats.ts"

const quick = process.argv.includes("--quick")
const rounds = quick ? 2 : 8
const sliceMillis = quick ? 300 : 1_500
const warmupMillis = quick ? 200 : 1_500

/** Runs `loops` loops of `cycle` for `millis`; cycles a second. */
const measure = async (loops: number, millis: number, cycle: (loop: number) => Promise<unknown>) => {
  let count = 0
  const end = now() + millis
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      while (now() < end) {
        await cycle(loop)
        count++
      }
    })
  )
  return (count * 1000) / millis
}

/** The work both sides run in the lock: an async function that takes the signal. */
const work = async (_signal: AbortSignal): Promise<void> => {}

/** A median ratio and its range. */
const range = (values: ReadonlyArray<number>) =>
  `${median(values).toFixed(3)}x (${Math.min(...values).toFixed(2)}-${Math.max(...values).toFixed(2)})`

const run = Effect.gen(function* () {
  const server = yield* RedisServer.start({ flavor: "redis7" })
  const startedAt = new Date().toISOString()
  const loadBefore = load1()
  const backend = NodeRedisBackend.layer({ url: server.url })
  // The Effect side: a runtime with the lock over its own backend, called from async code the way
  // an Effect program's fibers would be started (`runPromise` per loop, the calls inside Effect).
  const effectRuntime = ManagedRuntime.make(Lock.layer({ namespace: "bench-effect" }).pipe(Layer.provide(backend)))
  const promiseClient = PromiseClient.make(backend, { lock: { namespace: "bench-promise" } })
  const effectLoops = (loops: number, millis: number, body: Effect.Effect<void, unknown>): Promise<number> =>
    effectRuntime.runPromise(
      Effect.gen(function* () {
        const lock = yield* Lock.Lock
        let count = 0
        const end = now() + millis
        yield* Effect.forEach(
          Array.from({ length: loops }, (_, i) => i),
          (loop) =>
            Effect.whileLoop({
              while: () => now() < end,
              body: () => Effect.ignore(lock.withLock(`k${loop}`, { waitTimeout: 5_000 })(body)),
              step: () => void count++
            }),
          { concurrency: "unbounded", discard: true }
        )
        return (count * 1000) / millis
      })
    )
  const asyncBody = Effect.tryPromise((signal) => work(signal))
  const sides = {
    async: (loops: number, millis: number) => effectLoops(loops, millis, asyncBody),
    void: (loops: number, millis: number) => effectLoops(loops, millis, Effect.void),
    promise: (loops: number, millis: number) =>
      measure(loops, millis, (loop) => promiseClient.using(`k${loop}`, { waitTimeout: 5_000 }, work))
  }
  type Side = keyof typeof sides
  const names: ReadonlyArray<Side> = ["async", "void", "promise"]
  const rows: Array<Array<string>> = []
  for (const loops of [1, 64]) {
    for (const side of names) yield* Effect.promise(() => sides[side](loops, warmupMillis))
    const rates: Record<Side, Array<number>> = { async: [], void: [], promise: [] }
    const overAsync: Array<number> = []
    const overVoid: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      // Each side first, second and third in turn.
      const order = names.map((_, i) => names[(i + round) % names.length]!)
      const rate: Partial<Record<Side, number>> = {}
      for (const side of order) rate[side] = yield* Effect.promise(() => sides[side](loops, sliceMillis))
      for (const side of names) rates[side].push(rate[side]!)
      overAsync.push(rate.promise! / rate.async!)
      overVoid.push(rate.promise! / rate.void!)
      process.stderr.write(
        `c${loops} round ${round + 1}: ${names.map((side) => `${side} ${rate[side]!.toFixed(0)}/s`).join(", ")}\n`
      )
    }
    rows.push([
      `c${loops}`,
      median(rates.async).toFixed(0),
      median(rates.void).toFixed(0),
      median(rates.promise).toFixed(0),
      range(overAsync),
      range(overVoid)
    ])
  }
  yield* Effect.promise(() => promiseClient.close())
  yield* Effect.promise(() => effectRuntime.dispose())
  process.stdout.write(
    [
      `Promise API against the Effect call, ${startedAt}, redis7 standalone, ${rounds} rounds of ${sliceMillis} ms per side ` +
        `(order rotated), load average ${loadBefore.toFixed(2)} before and ${load1().toFixed(2)} after (2 cores).`,
      "",
      table(
        [
          "workload",
          "Effect, async body, cycles/s",
          "Effect, `Effect.void` body, cycles/s",
          "`using`, cycles/s",
          "`using` / Effect with the async body",
          "`using` / Effect with `Effect.void`"
        ],
        rows
      ),
      ""
    ].join("\n")
  )
})

Effect.runPromise(Effect.scoped(run)).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${String(error)}\n`)
    process.exit(1)
  }
)
