// Rare branches of the replicated write sequence, driven by a scripted connection (the real
// topologies cannot produce them on demand): a write on a node that is no longer the master, the
// client's view disagreeing with ROLE, and how many replicas WAIT asks for. The behaviour on real
// Sentinel and Cluster deployments is covered by the contract, ReplicaFaults and Failover suites.
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import { TestClock } from "effect/testing"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { LockRedisError } from "@sage/lock/LockError"
import { classify } from "../src/internal/connection/classify.ts"
import type { Pool } from "../src/internal/pool/pool.ts"
import { makeBackend } from "../src/internal/replicated/backend.ts"
import type { Route, Topology } from "../src/internal/replicated/topology.ts"
import * as Scripts from "../src/internal/scripts.ts"

const scripted = (options: {
  role: unknown
  viewSaysMaster: boolean
  viewReplicas: number | undefined
  /** Every replica the view knows, healthy or not (see `Route.knownReplicas`). */
  knownReplicas?: number
  /** The view's `departed` hook (see `Route.departed`), as the Sentinel topology provides it. */
  departed?: Route["departed"]
  /** How many replicas acknowledge a write (WAIT answers at most this many); all it asks by default. */
  acks?: number
  /**
   * After the acquisition, the node is as slow as its bounds allow: a connection takes 90 % of the
   * caller's budget, and the release script uses its whole timeout, then gets NOSCRIPT (a restarted,
   * empty node) and uses its whole timeout again when re-sent as EVAL.
   */
  slowAfterAcquire?: boolean
  /**
   * The key's slot is migrating: its master (the view's) answers the acquisition with `ASK`, naming
   * `askTarget`, which runs it after `ASKING`. `targetReplicas` is what the view lists for that node.
   */
  ask?: { readonly targetReplicas: number | undefined }
}) => {
  const sent: Array<ReadonlyArray<string>> = []
  /** The time limit each command in `sent` was given. */
  const timeouts: Array<number> = []
  /** The address of each command in `sent`. */
  const sentTo: Array<string> = []
  let acquired = false
  const sendOn = (address: string) => (args: ReadonlyArray<string>, timeoutMillis: number) => {
    if (options.ask !== undefined && address === sourceAddress && args[1] === Scripts.acquire.sha1) {
      return Effect.fail(
        new LockRedisError({
          command: "EVALSHA",
          kind: "server",
          code: "ASK",
          reply: `ASK 1234 ${askTarget}`,
          retryable: true,
          mayHaveExecuted: false
        })
      )
    }
    sentTo.push(address)
    return send(args, timeoutMillis)
  }
  const send = (args: ReadonlyArray<string>, timeoutMillis: number) => {
    if (options.slowAfterAcquire === true && acquired && (args[1] === Scripts.release.sha1 || args[0] === "EVAL")) {
      sent.push(args)
      const noScript = new LockRedisError({
        command: "EVALSHA",
        kind: "server",
        code: "NOSCRIPT",
        reply: "NOSCRIPT No matching script.",
        retryable: false,
        mayHaveExecuted: false
      })
      return Effect.andThen(
        Effect.sleep(Math.max(0, timeoutMillis)),
        args[0] === "EVAL" ? Effect.succeed(1) : Effect.fail(noScript)
      )
    }
    return Effect.sync(() => {
      sent.push(args)
      timeouts.push(timeoutMillis)
      if (args[0] === "ROLE") return options.role
      if (args[0] === "WAIT") return Math.min(Number(args[1]), options.acks ?? Infinity)
      if (args[1] === Scripts.acquire.sha1) {
        acquired = true
        return [1, 1]
      }
      return 1
    })
  }
  // Like the real pool, `f` is called once the connection is held (after the slow connect). The
  // scripted node has one kind of connection: `shared` is `use`.
  const use: Pool["use"] = (address, timeout, f) =>
    Effect.andThen(
      options.slowAfterAcquire === true && acquired ? Effect.sleep(0.9 * timeout) : Effect.void,
      Effect.suspend(() =>
        f({
          address,
          send: sendOn(address),
          sendAll: (commands, timeoutMillis) =>
            Effect.forEach(commands, (args) => Effect.result(sendOn(address)(args, timeoutMillis)))
        })
      )
    )
  const pool: Pool = {
    openConnections: () => 1,
    use,
    shared: (address, _key, timeout, f) => use(address, timeout, f),
    classify
  }
  const topology: Topology = {
    description: "scripted",
    route: () =>
      Result.succeed({
        address: sourceAddress,
        replicas: options.viewReplicas,
        knownReplicas: options.knownReplicas,
        departed: options.departed
      }),
    isMaster: () => options.viewSaysMaster,
    routeAt: (address) =>
      options.ask !== undefined && address === askTarget
        ? { address, replicas: options.ask.targetReplicas }
        : undefined,
    refresh: () => Effect.void,
    publish: "PUBLISH",
    subscriber: () => Promise.reject(new Error("no wake-ups in this scripted topology"))
  }
  return { backend: makeBackend(topology, pool), sent, timeouts, sentTo }
}

const sourceAddress = "10.0.0.1:6379"
const askTarget = "10.0.0.9:6379"

/** A ROLE reply's list of `n` connected replicas. */
const replicas = (n: number) => Array.from({ length: n }, (_, i) => [`10.0.1.${i}`, "6379", "0"])

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
        // The WAIT sent with the script (before ROLE answered) is the only one: nothing waits for
        // replicas of a node that is not the master.
        assert.isAtMost(sent.filter((args) => args[0] === "WAIT").length, 1, "no WAIT after the role check")
      })
    )
  }

  // Found by the fault matrix (master-kill-failover-restart on Sentinel): the old master, restarted
  // empty, takes a write while ROLE says master; its cleanup connected, got NOSCRIPT and re-sent the
  // script, each step with the whole budget, so the call ended seconds after its TimedOut.
  it.effect("a write outside the view is cleaned within the one-second release bound, however slow that node is", () =>
    Effect.gen(function* () {
      const { backend, sent } = scripted({
        role: ["master", 10, [["10.0.0.2", "6379", "10"]]],
        viewSaysMaster: false,
        viewReplicas: 1,
        slowAfterAcquire: true
      })
      const lock = yield* lockOn(yield* backend)
      const fiber = yield* Effect.forkChild(
        Effect.flip(Effect.void.pipe(lock.withLock("k", { waitTimeout: "1 second" })))
      )
      yield* TestClock.adjust("1100 millis")
      const done = fiber.pollUnsafe()
      assert.isDefined(done, "the call ended within the release bound")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "LockLost")
      assert.isTrue(
        sent.some((args) => args[0] === "EVAL"),
        "the slow node was asked to release (NOSCRIPT, then EVAL)"
      )
    })
  )

  // Live clock: an unacknowledged attempt is retried after a real backoff until the wait runs out.
  it.live("acknowledgement needs the replicas both the view (when it has a list) and ROLE list, and at least one", () =>
    Effect.gen(function* () {
      const cases = [
        { view: 2, role: 1, acks: 1, acquired: true },
        { view: 1, role: 2, acks: 1, acquired: true },
        { view: 2, role: 2, acks: 2, acquired: true },
        // The early WAIT got one of two: a second WAIT asks for both, and the write is not acknowledged.
        { view: 2, role: 2, acks: 1, acquired: false },
        // A master listing no replica never passes with WAIT 0.
        { view: 2, role: 0, acks: 0, acquired: false },
        // The view knows no replica: no early WAIT; ROLE lists one, which must acknowledge.
        { view: 0, role: 1, acks: 1, acquired: true },
        // A shared client that keeps no replica list: every replica the master lists, at least one.
        { view: undefined, role: 2, acks: 2, acquired: true },
        { view: undefined, role: 2, acks: 1, acquired: false },
        // ...and a master listing none is retried until the budget ends (TimedOut), not NO_REPLICAS.
        { view: undefined, role: 0, acks: 0, acquired: false }
      ]
      for (const { view, role, acks, acquired } of cases) {
        const label = JSON.stringify({ view, role, acks })
        const { backend, sent } = scripted({
          role: ["master", 10, replicas(role)],
          viewSaysMaster: true,
          viewReplicas: view,
          acks
        })
        const lock = yield* lockOn(yield* backend)
        const result = yield* Effect.void.pipe(lock.withLock("k", { waitTimeout: "300 millis" }), Effect.result)
        assert.strictEqual(Result.isSuccess(result), acquired, label)
        if (!acquired) {
          assert.isTrue(Result.isFailure(result) && result.failure._tag === "TimedOut", label)
          const wanted = String(Math.max(1, view === undefined ? role : Math.min(view, role)))
          assert.isTrue(
            sent.some((args) => args[0] === "WAIT" && args[1] === wanted),
            `${label}: a WAIT asked for ${wanted}`
          )
        }
        const waits = sent.filter((args) => args[0] === "WAIT")
        assert.isAbove(waits.length, 0, label)
        for (const wait of waits) assert.isAbove(Number(wait[2]), 0, `${label}: never WAIT n 0`)
      }
    })
  )

  // Live clock: the unacknowledged attempts are retried after a real backoff.
  it.live("no healthy replica anywhere: NO_REPLICAS only when the view knows none, else waited for", () =>
    Effect.gen(function* () {
      // Right after a failover the sentinels still list the replicas (reattaching, or down) while
      // neither they nor the new master count one as healthy: the write waits for them.
      const reattaching = scripted({
        role: ["master", 10, []],
        viewSaysMaster: true,
        viewReplicas: 0,
        knownReplicas: 2
      })
      const waited = yield* Effect.flip(
        Effect.void.pipe((yield* lockOn(yield* reattaching.backend)).withLock("k", { waitTimeout: "300 millis" }))
      )
      assert.strictEqual(waited._tag, "TimedOut")
      if (waited._tag === "TimedOut") {
        assert.strictEqual(waited.reason, "unacknowledged")
        assert.isAbove(waited.attempts, 1, "retried")
        const last = waited.lastError
        assert.isTrue(last instanceof LockRedisError, "the last error is kept")
        if (last instanceof LockRedisError) {
          assert.strictEqual(last.code, "UNACKNOWLEDGED")
          assert.include(last.reply, "no replica of 10.0.0.1:6379 is connected yet")
        }
      }
      // A deployment without any replica: a permanent error at once, naming the way out.
      const none = scripted({ role: ["master", 10, []], viewSaysMaster: true, viewReplicas: 0, knownReplicas: 0 })
      const failed = yield* Effect.flip(
        Effect.void.pipe((yield* lockOn(yield* none.backend)).withLock("k", { waitTimeout: "300 millis" }))
      )
      assert.strictEqual(failed._tag, "LockRedisError")
      if (failed._tag === "LockRedisError") assert.strictEqual(failed.code, "NO_REPLICAS")
    })
  )

  it.effect("after ASK, the node the slot is migrating to is acknowledged by its own replicas", () =>
    Effect.gen(function* () {
      // The source lists one replica, the target two (the view's count and its ROLE): both of the
      // target's must acknowledge, on the connection that ran the script there.
      const { backend, sent, sentTo } = scripted({
        role: ["master", 10, replicas(2)],
        viewSaysMaster: true,
        viewReplicas: 1,
        ask: { targetReplicas: 2 }
      })
      const lock = yield* lockOn(yield* backend)
      yield* lock.withLock("k", { waitTimeout: "1 second" })(Effect.void)
      const acquired = sent.findIndex((args) => args[1] === Scripts.acquire.sha1)
      assert.strictEqual(sentTo[acquired], askTarget, "the script ran on the target")
      assert.deepStrictEqual(sent[acquired - 1], ["ASKING"])
      // (The source got a WAIT too, in the same round trip as the script it redirected.)
      const waits = sent.flatMap((args, i) => (args[0] === "WAIT" && sentTo[i] === askTarget ? [args[1]] : []))
      assert.isAbove(waits.length, 0, "the target's replicas were waited for")
      for (const wanted of waits) assert.strictEqual(wanted, "2", "both of the target's replicas")
    })
  )

  it.effect("the early WAIT asks for as many replicas as the master listed last time", () =>
    Effect.gen(function* () {
      const { backend, sent } = scripted({
        role: ["master", 10, [["10.0.1.1", "6379", "0"]]],
        viewSaysMaster: true,
        viewReplicas: 3
      })
      const lock = yield* lockOn(yield* backend)
      yield* lock.withLock("a", { waitTimeout: "1 second" })(Effect.void)
      yield* lock.withLock("b", { waitTimeout: "1 second" })(Effect.void)
      const waits = sent.filter((args) => args[0] === "WAIT").map((args) => args[1])
      assert.deepStrictEqual(waits, ["3", "1"])
    })
  )

  it.effect(
    "every WAIT blocks more than 100 ms less than its reply may take: a server answers a WAIT's timeout late",
    () =>
      Effect.gen(function* () {
        // An idle server handles a WAIT's timeout on its next serverCron, up to 100 ms (hz 10) after
        // it: a WAIT blocking as long as the client waits for its reply could be cut off by the
        // client's limit (TIMEOUT) while the server still owes the count (UNACKNOWLEDGED).
        for (const budget of [1_000, 150, 80]) {
          const { backend, sent, timeouts } = scripted({
            role: ["master", 10, [["a", "1", "0"]]],
            viewSaysMaster: true,
            viewReplicas: 1,
            acks: 0
          })
          const reply = yield* (yield* backend)
            .acquire({ key: "t:{k}", token: "tok", leaseMillis: 5_000, timeoutMillis: budget, acknowledge: true })
            .pipe(Effect.result)
          assert.isTrue(Result.isFailure(reply) && reply.failure.code === "UNACKNOWLEDGED", `budget ${budget}`)
          const waits = sent.flatMap((args, i) =>
            args[0] === "WAIT" ? [{ block: Number(args[2]), limit: timeouts[i]! }] : []
          )
          // The early WAIT, sent with the script, only when its command's limit leaves room beyond it
          // (with a second of budget it blocks its usual 100 ms); the second WAIT always.
          if (budget === 1_000) assert.strictEqual(waits[0]?.block, 100, "the early WAIT as usual")
          assert.strictEqual(waits.length, budget === 80 ? 1 : 2, `budget ${budget}: ${JSON.stringify(waits)}`)
          for (const wait of waits) {
            assert.isAbove(wait.block, 0, `budget ${budget}`)
            assert.isAtMost(wait.block, budget, `budget ${budget}: within the budget`)
            assert.isBelow(wait.block + 100, wait.limit, `budget ${budget}: room for a late reply`)
          }
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

  it.effect(
    "a replica that left the master while the view vouches for it fails the write, whatever the others acknowledge",
    () =>
      Effect.gen(function* () {
        // The old master after a commanded failover: it lists one of its two replicas (the other was
        // promoted), and that one acknowledges. The view still vouches for the promoted replica.
        const asked: Array<string> = []
        const { backend } = scripted({
          role: ["master", 10, replicas(1)],
          viewSaysMaster: true,
          viewReplicas: 2,
          departed: (master, role) =>
            Effect.sync(() => {
              asked.push(`${master} ${JSON.stringify(role)}`)
              return "10.0.1.1:6379"
            })
        })
        const reply = yield* (yield* backend)
          .acquire({ key: "t:{k}", token: "tok", leaseMillis: 5_000, timeoutMillis: 1_000, acknowledge: true })
          .pipe(Effect.flip)
        assert.strictEqual(reply.code, "UNACKNOWLEDGED")
        assert.include(reply.reply, "10.0.1.1:6379")
        assert.isTrue(reply.mayHaveExecuted, "the write was applied: cleanup must release it")
        assert.deepStrictEqual(asked, [`10.0.0.1:6379 ${JSON.stringify(["master", 10, replicas(1)])}`])

        // No departure: the one replica both lists is enough.
        const calm = scripted({
          role: ["master", 10, replicas(1)],
          viewSaysMaster: true,
          viewReplicas: 2,
          departed: () => Effect.undefined
        })
        const granted = yield* (yield* calm.backend).acquire({
          key: "t:{k}",
          token: "tok",
          leaseMillis: 5_000,
          timeoutMillis: 1_000,
          acknowledge: true
        })
        assert.strictEqual(granted._tag, "Acquired")
      })
  )
})
