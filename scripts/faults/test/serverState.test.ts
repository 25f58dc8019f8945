// The final read of the servers on a semaphore's and an election's keys, written by hand on a real
// server: what it reports as left behind or stranded, and that a fence key (and an election's leader
// record) alone passes.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { ServerBinary } from "@sage/lock-testkit"
import * as Deployments from "../deployments.ts"
import { clockStepMillis, leftovers, strandedWaiters } from "../serverState.ts"

const flavor = ServerBinary.flavorsUnderTest()[0] ?? "redis7"
const key = "faults:{k0}"

describe("fault matrix: what is left of a semaphore", () => {
  it.live(
    "reports its holders, permits hash and registrations (asks included), and lets its fence key stay",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const deployment = yield* Deployments.start("standalone", flavor)
          const master = yield* deployment.masterFor(key)
          const write = (...commands: ReadonlyArray<ReadonlyArray<string>>) => master.session(commands)
          yield* write(
            ["ZADD", key, "1000", "holder-token"],
            ["HSET", `${key}:permits`, "holder-token", "2:17", "=limit", "3", "=used", "2"],
            ["ZADD", `${key}:waiters`, "1", "g:waiter-1"],
            ["ZADD", `${key}:waiting`, "2000", "g:waiter-1"],
            ["HSET", `${key}:asks`, "g:waiter-1", "1", "g:waiter-2", "2"],
            ["SET", `${key}:fence`, "17"]
          )
          const left = yield* leftovers(deployment, "faults", [key], 0, "semaphore")
          assert.deepStrictEqual(
            left.keys.map((described) => described.split(" ")[0]),
            [key, `${key}:permits`]
          )
          assert.isTrue(left.keys[0]?.includes("(zset, TTL -1 ms)"), left.keys.join(", "))
          assert.deepStrictEqual(left.registrations.map((r) => `${r.queue} ${r.waiter}`).toSorted(), [
            `${key}:asks g:waiter-1`,
            `${key}:asks g:waiter-2`,
            `${key}:waiters g:waiter-1`,
            `${key}:waiting g:waiter-1`
          ])
          // Distinct waiters: one in the line (and its asks), one in the asks alone.
          assert.strictEqual(strandedWaiters(left), 2)
          yield* write(["DEL", key, `${key}:permits`, `${key}:waiters`, `${key}:waiting`, `${key}:asks`])
          assert.deepStrictEqual(yield* leftovers(deployment, "faults", [key], 0, "semaphore"), {
            keys: [],
            registrations: [],
            unreadable: []
          })
        })
      ),
    60_000
  )

  it.live(
    "reports an election's lock key and registrations, and lets its fence key and leader record stay",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const deployment = yield* Deployments.start("standalone", flavor)
          const master = yield* deployment.masterFor(key)
          const write = (...commands: ReadonlyArray<ReadonlyArray<string>>) => master.session(commands)
          yield* write(
            ["SET", key, "leader-token"],
            ["SET", `${key}:fence`, "17"],
            ["HSET", `${key}:leader`, "term", "17", "candidate", "w1-f0", "value", "", "since", "1", "revision", "1"],
            ["ZADD", `${key}:waiters`, "1", "waiter-1"]
          )
          const left = yield* leftovers(deployment, "faults", [key], 0, "election")
          assert.deepStrictEqual(
            left.keys.map((described) => described.split(" ")[0]),
            [key]
          )
          assert.deepStrictEqual(
            left.registrations.map((r) => `${r.queue} ${r.waiter}`),
            [`${key}:waiters waiter-1`]
          )
          // In a lock cell nothing writes a leader record: one found there is left behind.
          const asLock = yield* leftovers(deployment, "faults", [key], 0, "lock")
          assert.deepStrictEqual(
            asLock.keys.map((described) => described.split(" ")[0]),
            [key, `${key}:leader`]
          )
          yield* write(["DEL", key, `${key}:waiters`])
          assert.deepStrictEqual(yield* leftovers(deployment, "faults", [key], 0, "election"), {
            keys: [],
            registrations: [],
            unreadable: []
          })
        })
      ),
    60_000
  )
})

describe("fault matrix: the servers' clock against the monotonic one", () => {
  it("measures a step between two readings from the middles of their bounds, and nothing without both", () => {
    const before = { low: 1_000_000, high: 1_000_400 }
    assert.strictEqual(clockStepMillis(before, { low: 5_490_000, high: 5_490_200 }), 4489.9)
    assert.strictEqual(clockStepMillis(before, { low: 999_000, high: 999_400 }), -1)
    assert.strictEqual(clockStepMillis(before, before), 0)
    assert.strictEqual(clockStepMillis(undefined, before), undefined)
    assert.strictEqual(clockStepMillis(before, undefined), undefined)
  })
})
