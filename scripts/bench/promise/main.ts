// What the Promise API costs over the Effect call it runs: uncontended `withLock(key)(Effect.void)`
// from an Effect program beside `client.using(key, ..., async () => {})` from async code, one call at
// a time (c1) and 64 loops at once on keys of their own (c64), against one Redis 7 server, in
// rounds that take turns (the order rotated), each over its own backend. The report gives each
// round's cycles a second and the median ratio.
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

const run = Effect.gen(function* () {
  const server = yield* RedisServer.start({ flavor: "redis7" })
  const startedAt = new Date().toISOString()
  const loadBefore = load1()
  const backend = NodeRedisBackend.layer({ url: server.url })
  // The Effect side: a runtime with the lock over its own backend, called from async code the way
  // an Effect program's fibers would be started (`runPromise` per loop, the calls inside Effect).
  const effectRuntime = ManagedRuntime.make(Lock.layer({ namespace: "bench-effect" }).pipe(Layer.provide(backend)))
  const promiseClient = PromiseClient.make(backend, { lock: { namespace: "bench-promise" } })
  const effectLoops = (loops: number, millis: number): Promise<number> =>
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
              body: () => lock.withLock(`k${loop}`, { waitTimeout: 5_000 })(Effect.void),
              step: () => void count++
            }),
          { concurrency: "unbounded", discard: true }
        )
        return (count * 1000) / millis
      })
    )
  const promiseLoops = (loops: number, millis: number): Promise<number> =>
    measure(loops, millis, (loop) => promiseClient.using(`k${loop}`, { waitTimeout: 5_000 }, async () => {}))
  const rows: Array<Array<string>> = []
  for (const loops of [1, 64]) {
    yield* Effect.promise(() => effectLoops(loops, warmupMillis))
    yield* Effect.promise(() => promiseLoops(loops, warmupMillis))
    const ratios: Array<number> = []
    const effectRates: Array<number> = []
    const promiseRates: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? ["effect", "promise"] : ["promise", "effect"]
      const rate: Record<string, number> = {}
      for (const side of order) {
        rate[side] = yield* Effect.promise(() =>
          side === "effect" ? effectLoops(loops, sliceMillis) : promiseLoops(loops, sliceMillis)
        )
      }
      effectRates.push(rate["effect"]!)
      promiseRates.push(rate["promise"]!)
      ratios.push(rate["promise"]! / rate["effect"]!)
      process.stderr.write(
        `c${loops} round ${round + 1}: effect ${rate["effect"]!.toFixed(0)}/s, promise ${rate["promise"]!.toFixed(0)}/s\n`
      )
    }
    rows.push([
      `c${loops}`,
      median(effectRates).toFixed(0),
      median(promiseRates).toFixed(0),
      `${median(ratios).toFixed(3)}x`,
      `${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}`
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
        ["workload", "Effect cycles/s (median)", "Promise cycles/s (median)", "Promise / Effect (median)", "range"],
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
