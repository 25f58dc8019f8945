// Cross-process wake-up and fairness on a real server. Each "process" is a lock client over its own
// backend (its own connections and waiter id), so everything between them goes through the server
// exactly as between processes: the waiter queue, the release's PUBLISH, the subscriber.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Lock, LockScripts } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { FaultProxy, RedisServer, ServerBinary } from "@sage/lock-testkit"
import { createClient } from "redis"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import {
  clientOver,
  handoff as handoffVia,
  lockKeyOf,
  median,
  namespace,
  now,
  show,
  wakeupsComeBackAfterStall,
  waitersRegistered as registeredVia,
  wokenWithinMillis
} from "@sage/lock-testkit/contract/Handoff"

const handoff = (
  server: RedisServer.RedisServer,
  holder: Lock.LockClient<string>,
  waiter: Lock.LockClient<string>,
  key: string
) => handoffVia(() => Effect.succeed(server), holder, waiter, key)
const waitersRegistered = (server: RedisServer.RedisServer, key: string, n: number) =>
  registeredVia(() => Effect.succeed(server), key, n)

/** A lock client over its own backend, as another process would have. */
const client = (url: string) => Effect.flatMap(NodeRedisBackend.make({ url }), clientOver)

const flavors = ServerBinary.flavorsUnderTest()

for (const flavor of flavors) {
  describe(`wake-up on release on ${flavor}`, () => {
    it.live("a release wakes the waiter of another process at once, naming only that waiter", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const a = yield* client(server.url)
        const b = yield* client(server.url)
        const messages: Array<string> = []
        const spy = createClient({ url: server.url })
        yield* Effect.promise(() => spy.connect())
        yield* Effect.addFinalizer(() => Effect.promise(() => spy.close()))
        yield* Effect.promise(() =>
          // The key's channel, and the per-waiter channels of its granting waiters.
          spy.pSubscribe(`${LockScripts.wakeChannel(lockKeyOf("k"))}*`, (message) => messages.push(message))
        )
        const rounds = 5
        const gaps: Array<number> = []
        for (let i = 0; i < rounds; i++)
          gaps.push(yield* handoff(server, i % 2 === 0 ? a : b, i % 2 === 0 ? b : a, "k"))
        // Without a wake-up the waiter would only notice at its next poll, at least 500 ms later.
        assert.isBelow(median(gaps), wokenWithinMillis, `handoff ms: ${show(gaps)}`)
        assert.strictEqual(messages.length, rounds, "one message per release with a waiter")
        // A message is a waiter id, or a grant to it (`<id>:<fence>:<claim ms>`).
        assert.strictEqual(
          new Set(messages.map((message) => message.split(":")[0])).size,
          2,
          "each message names one client's waiter id"
        )
      })
    )

    it.live("a killed subscriber connection or a lost message costs only the poll, then wake-ups resume", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const a = yield* client(server.url)
        const b = yield* client(server.url)
        assert.isBelow(yield* handoff(server, a, b, "k"), wokenWithinMillis, "wake-up works before the fault")
        yield* server.command("CLIENT", "KILL", "TYPE", "pubsub")
        const start = yield* now
        const gap = yield* handoff(server, a, b, "k")
        assert.isBelow(gap, 2_500, "without the message the waiter still came at its next poll")
        assert.isBelow((yield* now) - start, 5_000)
        // node-redis reconnects the subscriber and resubscribes.
        const later: Array<number> = []
        for (let i = 0; i < 3; i++) later.push(yield* handoff(server, a, b, "k"))
        assert.isBelow(median(later), wokenWithinMillis, `handoff ms after resubscribing: ${show(later)}`)
      })
    )

    // What is watched is the client's: one server flavor is enough, the last (the Cluster case in
    // WakeupReplicated.test.ts runs on the first).
    if (flavor === flavors.at(-1)) {
      it.live("a subscriber connection that goes silent while reported ready is replaced, and wake-ups resume", () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          const proxy = yield* FaultProxy.make({ upstreamPort: server.port })
          const a = yield* client(server.url)
          // The waiter's connections go through the proxy: one for commands, one for its subscriptions.
          // A 5 s lease keeps the 1 s backoff cap `handoff` counts on, and attempts time out after 4.75 s.
          const b = yield* Lock.make({ namespace, leaseDuration: "5 seconds" }).pipe(
            Effect.provideService(LockBackend, yield* NodeRedisBackend.make({ url: proxy.url, connections: 1 }))
          )
          // Both connections (commands, subscriptions) then forward nothing; new ones pass.
          yield* wakeupsComeBackAfterStall(() => Effect.succeed(server), a, b, "k", [proxy], 30_000)
        })
      )
    }

    it.live("a dead waiter at the head of the line holds up the others for the claim window at most", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const a = yield* client(server.url)
        const c = yield* client(server.url)
        const [, waiters, until] = LockScripts.keysOf(lockKeyOf("k"))
        let releasedAt = 0
        const inside = yield* Deferred.make<void>()
        const held = yield* Effect.forkChild(
          a.withLock("k", { waitTimeout: "5 seconds" })(
            Effect.gen(function* () {
              yield* Deferred.succeed(inside, undefined)
              // A waiter that registered first and then died: its registration would last a minute.
              yield* server.command("ZADD", waiters, "0", "dead-waiter")
              yield* server.command("ZADD", until, String(Date.now() + 60_000), "dead-waiter")
              yield* waitersRegistered(server, "k", 2)
              yield* Effect.sleep(30)
              releasedAt = performance.now()
            })
          )
        )
        // Only once `a` holds the key (both clients connect on first use: either could be first).
        yield* Deferred.await(inside)
        const startedAt = yield* c.withLock("k", { waitTimeout: "10 seconds" })(now)
        yield* Fiber.join(held)
        assert.isBelow(startedAt - releasedAt, 2_500, "the line moved past the dead head")
        assert.isNull(yield* server.command("ZSCORE", waiters, "dead-waiter"), "its registration lapsed")
      })
    )

    it.live("a process with 8 fibers on a key cannot starve a second process", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const busy = yield* client(server.url)
        const lone = yield* client(server.url)
        const run = { stop: false }
        const counts = { busy: 0, lone: 0 }
        const worker = (lock: Lock.LockClient<string>, who: "busy" | "lone") =>
          Effect.gen(function* () {
            while (!run.stop) {
              yield* lock.withLock("hot", { waitTimeout: "10 seconds" })(Effect.sleep(1))
              counts[who]++
            }
          })
        const fibers = yield* Effect.forEach(
          [...Array.from({ length: 8 }, () => worker(busy, "busy")), worker(lone, "lone")],
          (effect) => Effect.forkChild(effect)
        )
        yield* Effect.sleep("3 seconds")
        run.stop = true
        yield* Effect.forEach(fibers, Fiber.join, { discard: true })
        const total = counts.busy + counts.lone
        assert.isAbove(total, 50, "the key changed hands many times")
        // The busy process hands the key to its own fibers at most twice in a row while the lone one
        // waits, then the server's line gives it to the lone worker: about a quarter of the
        // acquisitions or more, well above the 1/9 it would get as one of nine equal workers.
        assert.isAbove(counts.lone / total, 0.18, JSON.stringify(counts))
      })
    )
  })
}
