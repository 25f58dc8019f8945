// Rare branches of the replicated write sequence, driven by a scripted connection (the real
// topologies cannot produce them on demand): a write on a node that is no longer the master, the
// client's view disagreeing with ROLE, and how many replicas WAIT asks for. The behaviour on real
// Sentinel and Cluster deployments is covered by the contract, ReplicaFaults and Failover suites.
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import type { Pool } from "../src/internal/pool.ts"
import { makeBackend, type Topology } from "../src/internal/replicated.ts"
import * as Scripts from "../src/internal/scripts.ts"

const scripted = (options: { role: unknown; viewSaysMaster: boolean; viewReplicas: number }) => {
  const sent: Array<ReadonlyArray<string>> = []
  const pool: Pool = {
    openConnections: () => 1,
    use: (address, _timeout, f) =>
      f({
        address,
        send: (args) =>
          Effect.sync(() => {
            sent.push(args)
            if (args[0] === "ROLE") return options.role
            if (args[0] === "WAIT") return Number(args[1])
            if (args[1] === Scripts.acquire.sha1) return [1, 1]
            return 1
          })
      })
  }
  const topology: Topology = {
    description: "scripted",
    route: () => Effect.succeed({ address: "10.0.0.1:6379", replicas: options.viewReplicas }),
    isMaster: () => options.viewSaysMaster,
    refresh: () => Effect.void,
    publish: "PUBLISH",
    subscriber: () => Promise.reject(new Error("no wake-ups in this scripted topology"))
  }
  return { backend: makeBackend(topology, pool), sent }
}

const lockOn = (backend: LockBackend["Service"]) =>
  Lock.make({ namespace: "t", leaseDuration: "5 seconds" }).pipe(Effect.provideService(LockBackend, backend))

describe("replicated write checks", () => {
  for (const [label, options] of [
    ["the node answers ROLE = slave", { role: ["slave", "10.0.0.2", 6379, "connected", 10], viewSaysMaster: true }],
    [
      "the client's view names another master",
      { role: ["master", 10, [["10.0.0.2", "6379", "10"]]], viewSaysMaster: false }
    ]
  ] as const) {
    it.effect(`${label}: LockLost before the body starts, and the write is released`, () =>
      Effect.gen(function* () {
        const { backend, sent } = scripted({ ...options, viewReplicas: 1 })
        const lock = yield* lockOn(yield* backend)
        let ran = false
        const error = yield* Effect.sync(() => (ran = true)).pipe(
          lock.withLock("k", { waitTimeout: "1 second" }),
          Effect.flip
        )
        assert.strictEqual(error._tag, "LockLost")
        if (error._tag === "LockLost") {
          assert.strictEqual(error.phase, "acquire")
          assert.strictEqual(error.reason, "not-master")
        }
        assert.isFalse(ran)
        assert.isTrue(
          sent.some((args) => args[1] === Scripts.release.sha1),
          "the key written on the wrong node is released"
        )
        assert.isFalse(
          sent.some((args) => args[0] === "WAIT"),
          "no WAIT on a node that is not the master"
        )
      })
    )
  }

  it.effect("WAIT asks for the replicas both the view and ROLE list, and at least one", () =>
    Effect.gen(function* () {
      const cases = [
        { view: 2, role: [["a", "1", "0"]], expected: "1" },
        {
          view: 1,
          role: [
            ["a", "1", "0"],
            ["b", "2", "0"]
          ],
          expected: "1"
        },
        {
          view: 2,
          role: [
            ["a", "1", "0"],
            ["b", "2", "0"]
          ],
          expected: "2"
        },
        { view: 2, role: [], expected: "1" },
        { view: 0, role: [["a", "1", "0"]], expected: "1" }
      ]
      for (const { view, role, expected } of cases) {
        const { backend, sent } = scripted({ role: ["master", 10, role], viewSaysMaster: true, viewReplicas: view })
        const lock = yield* lockOn(yield* backend)
        yield* Effect.void.pipe(lock.withLock("k", { waitTimeout: "1 second" }), Effect.ignore)
        const wait = sent.find((args) => args[0] === "WAIT")
        assert.strictEqual(wait?.[1], expected, JSON.stringify({ view, role }))
        assert.isAbove(Number(wait?.[2]), 0, "never WAIT n 0")
      }
    })
  )

  it.effect("the budget is measured on the monotonic clock: a wall-clock step changes nothing", () =>
    Effect.gen(function* () {
      const real = yield* Clock.Clock
      for (const step of [3_600_000, -3_600_000]) {
        // The wall clock jumps by `step` after its first reading; monotonic time runs normally.
        let reads = 0
        const wall = () => real.currentTimeMillisUnsafe() + (reads++ > 0 ? step : 0)
        const stepped: Clock.Clock = {
          ...real,
          currentTimeMillisUnsafe: wall,
          currentTimeMillis: Effect.sync(wall),
          currentTimeNanosUnsafe: () => BigInt(wall()) * 1_000_000n,
          currentTimeNanos: Effect.sync(() => BigInt(wall()) * 1_000_000n)
        }
        const { backend, sent } = scripted({
          role: ["master", 10, [["a", "1", "0"]]],
          viewSaysMaster: true,
          viewReplicas: 1
        })
        const reply = yield* (yield* backend)
          .acquire({ key: "t:{k}", token: "tok", leaseMillis: 5_000, timeoutMillis: 1_000, acknowledge: true })
          .pipe(Effect.provideService(Clock.Clock, stepped), Effect.result)
        assert.isTrue(Result.isSuccess(reply), `step ${step}: ${JSON.stringify(reply)}`)
        const wait = sent.find((args) => args[0] === "WAIT")
        assert.isAtMost(Number(wait?.[2]), 1_000, `step ${step}: WAIT stays within the budget`)
        assert.isAbove(Number(wait?.[2]), 0)
      }
    })
  )
})
