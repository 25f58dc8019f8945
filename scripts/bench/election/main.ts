// How fast a resignation reaches observers: three candidates and three observers, each over its own
// backend (its own connections and subscriber, as separate processes would have), on one election.
// Each round the leader resigns and the time until every observer has seen the next term is
// recorded, with the time until the next leader's work started. Standalone (Redis 7, Valkey 8),
// Sentinel and Cluster (Redis 7) run one after another; the report gives the distributions and the
// load average. A leader that dies instead of resigning is measured by `npm run demo:election`, which
// needs separate processes to kill.
// `npm run bench:election [-- --quick]` at the repository root; the Markdown report goes to stdout.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { NodeRuntime } from "@effect/platform-node"
import { Election } from "@sage/lock"
import type { Leadership } from "@sage/lock/Leadership"
import { type Backend, LockBackend } from "@sage/lock/LockBackend"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import { ClusterTopology, RedisServer, SentinelTopology, type ServerBinary } from "@sage/lock-testkit"
import { load1, ms, now, summarize, table } from "../stats.ts"

const quick = process.argv.includes("--quick")
const rounds = quick ? 10 : 60
const candidates = 3
const observers = 3

interface Target {
  readonly name: string
  /** A backend of its own for one participant. */
  readonly backend: Effect.Effect<Backend, unknown, Scope.Scope>
}

const standalone = (flavor: ServerBinary.Flavor) =>
  Effect.map(RedisServer.start({ flavor }), (server): Target => ({
    name: `standalone ${flavor}`,
    backend: NodeRedisBackend.make({ url: server.url })
  }))

const sentinel = Effect.map(
  SentinelTopology.start({ flavor: "redis7", downAfterMillis: 8_000 }),
  (topology): Target => ({
    name: "sentinel redis7",
    backend: NodeRedisBackend.makeSentinel({ name: topology.masterName, sentinels: topology.sentinelNodes })
  })
)

const cluster = Effect.map(
  ClusterTopology.start({ flavor: "redis7", nodeTimeoutMillis: 8_000 }),
  (topology): Target => ({
    name: "cluster redis7",
    backend: NodeRedisBackend.makeCluster({
      rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
    })
  })
)

interface Samples {
  /** From `resign` to each observer seeing the next term (ms). */
  readonly seen: Array<number>
  /** From `resign` to the next leader's work starting (ms). */
  readonly led: Array<number>
}

/** A leader's leadership, and when its work started. */
interface Led {
  readonly leadership: Leadership
  readonly at: number
}

/** The rounds on one deployment. */
const measure = (target: Target): Effect.Effect<Samples, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const namespace = `bench-election-${Math.random().toString(36).slice(2, 8)}`
    const clientOf = (candidate: string) =>
      Effect.flatMap(target.backend, (backend) =>
        Election.make({ namespace, candidate, leaseDuration: "10 seconds", observeInterval: "1 second" }).pipe(
          Effect.provideService(LockBackend, backend)
        )
      )
    // What observers saw: each term, when first seen by each.
    const seenAt: Array<Map<number, number>> = []
    for (let i = 0; i < observers; i++) {
      const client = yield* clientOf(`observer-${i}`)
      const seen = new Map<number, number>()
      seenAt.push(seen)
      yield* Effect.forkScoped(
        Stream.runForEach(client.observe("bench"), (state) =>
          Effect.sync(() => {
            if (Option.isSome(state) && !seen.has(state.value.term)) seen.set(state.value.term, now())
          })
        )
      )
    }
    // Each leader hands its leadership to the bench and waits.
    let current = yield* Deferred.make<Led>()
    const work = (leadership: Leadership) =>
      Effect.andThen(
        Effect.suspend(() => Deferred.succeed(current, { leadership, at: now() })),
        Effect.never
      )
    const runners: Array<Fiber.Fiber<never, unknown>> = []
    for (let i = 0; i < candidates; i++) {
      const client = yield* clientOf(`candidate-${i}`)
      runners.push(yield* Effect.forkScoped(client.run("bench", work, { rejoinDelay: "1 millis" })))
    }
    const allSeen = (term: number) => seenAt.every((seen) => seen.has(term))
    const samples: Samples = { seen: [], led: [] }
    let leading = yield* Deferred.await(current)
    while (!allSeen(leading.leadership.term)) yield* Effect.sleep(1)
    for (let round = 0; round < rounds; round++) {
      current = yield* Deferred.make<Led>()
      const resignedAt = now()
      yield* leading.leadership.resign
      const next = yield* Deferred.await(current).pipe(Effect.timeout("10 seconds"))
      while (!allSeen(next.leadership.term)) yield* Effect.sleep(1)
      samples.led.push(next.at - resignedAt)
      for (const seen of seenAt) samples.seen.push(seen.get(next.leadership.term)! - resignedAt)
      leading = next
      // Let the resigned candidate take its place back in line.
      yield* Effect.sleep(20)
    }
    yield* Effect.forEach(runners, Fiber.interrupt)
    return samples
  })

const program = Effect.gen(function* () {
  const startedAt = new Date()
  const loadBefore = load1()
  const rows: Array<Array<string>> = []
  for (const start of [standalone("redis7"), standalone("valkey8"), sentinel, cluster]) {
    const result = yield* Effect.scoped(
      Effect.flatMap(start, (target) => Effect.map(measure(target), (s) => [target.name, s] as const))
    )
    const [name, samples] = result
    process.stderr.write(`${name}: ${samples.seen.length} observations\n`)
    for (const [what, values] of [
      ["observers see the next term", samples.seen],
      ["the next leader's work starts", samples.led]
    ] as const) {
      const summary = summarize(values)
      rows.push([name, what, String(summary.count), ms(summary.p50), ms(summary.p90), ms(summary.p99), ms(summary.max)])
    }
  }
  const loadAfter = load1()
  process.stdout.write(
    [
      `Election hand-over after \`resign\`, ${startedAt.toISOString()}, ${rounds} resignations per deployment, ` +
        `${candidates} candidates and ${observers} observers each over its own connections, ` +
        `load average ${loadBefore.toFixed(2)} before and ${loadAfter.toFixed(2)} after (2 cores).`,
      "",
      table(["deployment", "from resign until", "samples", "p50 ms", "p90 ms", "p99 ms", "max ms"], rows),
      ""
    ].join("\n")
  )
})

NodeRuntime.runMain(program)
