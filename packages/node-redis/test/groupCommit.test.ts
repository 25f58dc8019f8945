// Group commit of acknowledged acquisitions on a real master with a replica: acquisitions that
// arrive together share one ROLE and one WAIT, each still gets its own outcome and its own
// acknowledgement, and a member that leaves before its batch goes out is never written.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import type { AcquireReply, LeaseRequest } from "@sage/lock/LockBackend"
import type { LockRedisError } from "@sage/lock/LockError"
import { Replicated, ServerBinary } from "@sage/lock-testkit"
import { nodeRedisDialer } from "../src/internal/pool/nodeRedisDialer.ts"
import * as Pool from "../src/internal/pool/pool.ts"
import { makeBackend } from "../src/internal/replicated/backend.ts"
import type { Topology } from "../src/internal/replicated/topology.ts"
import { noWakeups } from "./support.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

const onMasterWithReplica = (maxConnections: number) =>
  Effect.gen(function* () {
    const nodes = yield* Replicated.start({ flavor: flavor!, replicas: 1 })
    const address = `127.0.0.1:${nodes.master.port}`
    const pool = yield* Pool.make({ maxConnections, dialer: nodeRedisDialer({}) })
    const topology: Topology = {
      description: "a master with one replica",
      route: () => Result.succeed({ address, replicas: 1 }),
      isMaster: () => true,
      refresh: () => Effect.void,
      ...noWakeups
    }
    /** Calls of `command` the master has run so far (`INFO commandstats`). */
    const calls = (command: string) =>
      Effect.map(nodes.master.command("INFO", "commandstats"), (info) =>
        Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(String(info))?.[1] ?? 0)
      )
    return {
      nodes,
      address,
      pool,
      backend: yield* makeBackend(topology, pool, undefined, { groupCommit: true }),
      calls
    }
  })

/** The timers this process has running. */
const timers = (): number => process.getActiveResourcesInfo().filter((resource) => resource === "Timeout").length

const request = (key: string, timeoutMillis = 2_000): LeaseRequest => ({
  key,
  token: `token-${key}`,
  leaseMillis: 10_000,
  timeoutMillis,
  acknowledge: true
})

describe(`group commit of acknowledged acquisitions on ${flavor}`, () => {
  it.live("acquisitions that arrive together share ROLE and WAIT, and each gets its own outcome, acknowledged", () =>
    Effect.gen(function* () {
      const { nodes, backend, calls } = yield* onMasterWithReplica(10)
      // One first, so the early WAIT knows the master's replicas.
      assert.strictEqual((yield* backend.acquire(request("first")))._tag, "Acquired")
      const [roles, waits] = [yield* calls("role"), yield* calls("wait")]
      const timersBefore = timers()
      const keys = Array.from({ length: 32 }, (_, i) => `k{${i}}`)
      const outcomes = yield* Effect.forEach(
        [...keys, "first"],
        (key) => backend.acquire(key === "first" ? { ...request(key), token: "another" } : request(key)),
        { concurrency: "unbounded" }
      )
      for (const [i, key] of keys.entries()) assert.strictEqual(outcomes[i]!._tag, "Acquired", key)
      assert.strictEqual(outcomes[keys.length]!._tag, "Busy", "a held key answers busy to another token")
      const fences = outcomes.flatMap((outcome) => (outcome._tag === "Acquired" ? [outcome.fence] : []))
      assert.strictEqual(new Set(fences).size, keys.length, "each its own fence")
      const batches = (yield* calls("role")) - roles
      assert.isAtMost(batches, 8, `33 acquisitions took ${batches} ROLE calls`)
      assert.isAtMost((yield* calls("wait")) - waits, batches, "at most one WAIT per batch")
      // Each member's own time limit ended with its outcome (2 s budgets: none has fired yet).
      assert.isBelow(timers() - timersBefore, 8, "no timer left running per answered member")
      // Acknowledged: the replica has every lease.
      const [replica] = nodes.replicas
      for (const key of keys) assert.strictEqual(yield* replica!.command("GET", key), `token-${key}`, key)
    })
  )

  it.live("with a stalled replica every member fails UNACKNOWLEDGED within its own budget, then all recover", () =>
    Effect.gen(function* () {
      const { nodes, backend, pool } = yield* onMasterWithReplica(10)
      assert.strictEqual((yield* backend.acquire(request("first")))._tag, "Acquired")
      const [replica] = nodes.replicas
      yield* replica!.pause
      yield* Effect.addFinalizer(() => Effect.ignore(replica!.resume))
      const start = Date.now()
      const failures = yield* Effect.forEach(
        Array.from({ length: 12 }, (_, i) => `stalled{${i}}`),
        (key) => Effect.flip(backend.acquire(request(key, 600))),
        { concurrency: "unbounded" }
      )
      for (const failure of failures) {
        assert.strictEqual(failure.code, "UNACKNOWLEDGED", failure.message)
        assert.isTrue(failure.mayHaveExecuted, "the write may have been applied")
      }
      assert.isBelow(Date.now() - start, 2_500, "within the 600 ms budget, not stuck behind each other")
      yield* replica!.resume
      const after = yield* Effect.forEach(
        Array.from({ length: 12 }, (_, i) => `after{${i}}`),
        (key) => backend.acquire(request(key)),
        { concurrency: "unbounded" }
      )
      for (const outcome of after) assert.strictEqual(outcome._tag, "Acquired")
      assert.isAtMost(pool.openConnections(), 10, "no connection beyond the pool's bound")
    })
  )

  it.live("acquisitions interrupted at any moment leave group commit working: batches still form and go out", () =>
    Effect.gen(function* () {
      const { backend, calls } = yield* onMasterWithReplica(10)
      assert.strictEqual((yield* backend.acquire(request("first")))._tag, "Acquired")
      // 200 acquisitions, each interrupted after 0-3 ms: before, during or after its batch.
      yield* Effect.forEach(
        Array.from({ length: 200 }, (_, i) => i),
        (i) => Effect.timeoutOption(backend.acquire(request(`cut{${i}}`)), i % 4),
        { concurrency: 50, discard: true }
      )
      const roles = yield* calls("role")
      const keys = Array.from({ length: 32 }, (_, i) => `whole{${i}}`)
      const outcomes = yield* Effect.forEach(keys, (key) => backend.acquire(request(key)), { concurrency: "unbounded" })
      for (const [i, key] of keys.entries()) assert.strictEqual(outcomes[i]!._tag, "Acquired", key)
      const batches = (yield* calls("role")) - roles
      assert.isAtMost(batches, 8, `32 acquisitions took ${batches} ROLE calls`)
    })
  )

  it.live("a member that leaves, or runs out of time, before its batch goes out is never written", () =>
    Effect.gen(function* () {
      const { nodes, address, pool, backend } = yield* onMasterWithReplica(1)
      assert.strictEqual((yield* backend.acquire(request("first")))._tag, "Acquired")
      // The pool's only connection is held: the batches in flight wait for it, later members queue.
      const hog = yield* Effect.forkChild(pool.use(address, 5_000, () => Effect.never))
      yield* Effect.sleep(100)
      const members = yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => `queued{${i}}`),
        // Forked by this fiber, one after the other (a fork inside a concurrent forEach would belong
        // to its short-lived worker fiber).
        (key) => Effect.forkChild(backend.acquire(request(key, 5_000)))
      )
      // One with little time: it gives up on its own budget.
      const hurried = yield* Effect.flip(backend.acquire(request("hurried", 300)))
      assert.strictEqual(hurried.kind, "timeout", hurried.message)
      assert.isFalse(hurried.mayHaveExecuted, "never sent")
      // Two leave while waiting.
      yield* Fiber.interrupt(members[0]!)
      yield* Fiber.interrupt(members[7]!)
      yield* Fiber.interrupt(hog)
      const rest = yield* Effect.forEach(members.slice(1, 7), Fiber.join)
      for (const outcome of rest) assert.strictEqual(outcome._tag, "Acquired")
      for (const key of ["queued{0}", "queued{7}", "hurried"]) {
        assert.isNull(yield* nodes.master.command("GET", key), `${key} was never written`)
      }
    })
  )

  it.live("members queued behind more than a full batch of departed ones are still sent", () =>
    Effect.gen(function* () {
      const { address, pool, backend } = yield* onMasterWithReplica(1)
      assert.strictEqual((yield* backend.acquire(request("first")))._tag, "Acquired")
      // The pool's only connection is held, so what goes out now stays in flight.
      const hog = yield* Effect.forkChild(pool.use(address, 5_000, () => Effect.never))
      yield* Effect.sleep(100)
      // Four in flight (the most per node), one at a time so that each starts its own batch; from
      // then on, arrivals only queue.
      const inFlight: Array<Fiber.Fiber<AcquireReply, LockRedisError>> = []
      for (let i = 0; i < 4; i++) {
        inFlight.push(yield* Effect.forkChild(backend.acquire(request(`flight{${i}}`, 5_000))))
        yield* Effect.sleep(30)
      }
      // Each batch that ends starts the next one: four full batches' worth of members queue and leave.
      const departed = yield* Effect.forEach(
        Array.from({ length: 4 * 64 }, (_, i) => `gone{${i}}`),
        (key) => Effect.forkChild(backend.acquire(request(key, 5_000)))
      )
      const behind = yield* Effect.forkChild(backend.acquire(request("behind", 4_000)))
      yield* Effect.sleep(50)
      yield* Effect.forEach(departed, Fiber.interrupt, { discard: true })
      yield* Fiber.interrupt(hog)
      for (const fiber of inFlight) assert.strictEqual((yield* Fiber.join(fiber))._tag, "Acquired")
      const outcome = yield* Effect.result(Fiber.join(behind))
      assert.strictEqual(outcome._tag, "Success", JSON.stringify(outcome))
      if (outcome._tag === "Success") assert.strictEqual(outcome.success._tag, "Acquired")
    })
  )
})
