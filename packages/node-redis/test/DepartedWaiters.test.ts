// Waiters that leave the line cost the others nothing, and a wake-up channel the server refuses never
// turns waiting into a loop: on real servers, with the waiter's registration, its withdrawal and the
// commands it sends read from the server itself.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { LockScripts } from "@sage/lock"
import { Faults, RedisServer, ServerBinary } from "@sage/lock-testkit"
import { createClient } from "redis"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { clientOver, lockKeyOf, namespace } from "@sage/lock-testkit/contract/Handoff"

/** The waiter ids registered for `key`, oldest first. */
const waiterIds = (server: RedisServer.RedisServer, key: string) =>
  Effect.map(server.command("ZRANGE", LockScripts.keysOf(lockKeyOf(key))[1], "0", "-1"), (ids) =>
    (ids as Array<string>).map(String)
  )

/** How often the server ran `command`, refusals included (`INFO commandstats`). */
const callsOf = (info: unknown, command: string): number => {
  const line = new RegExp(`cmdstat_${command}:calls=(\\d+)[^\\r\\n]*?(?:rejected_calls=(\\d+))?`).exec(String(info))
  return line === null ? 0 : Number(line[1]) + Number(line[2] ?? 0)
}

/** A connection of the test's own, kept open (an admin command through the kit opens one each time). */
const adminClient = (server: RedisServer.RedisServer) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = createClient({ url: server.url })
      client.on("error", () => {})
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.close().catch(() => undefined))
  )

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`departed waiters and refused wake-ups on ${flavor}`, () => {
    it.live("a waiter that gives up with its attempt still on the wire withdraws what that attempt registered", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const holder = yield* Effect.flatMap(NodeRedisBackend.make({ url: server.url }), clientOver)
        const waiter = yield* Effect.flatMap(NodeRedisBackend.make({ url: server.url }), clientOver)
        const inside = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const held = yield* Effect.forkChild(
          holder.withLock("k", { waitTimeout: "5 seconds" })(
            Effect.andThen(Deferred.succeed(inside, undefined), Deferred.await(release))
          )
        )
        yield* Deferred.await(inside)
        // A waiter that gives up in the usual way: it withdraws, and the server caches that script (a
        // withdrawal sent while the server sleeps would otherwise time out on `NOSCRIPT`).
        const impatient = yield* Effect.flip(waiter.withLock("k", { waitTimeout: "50 millis" })(Effect.void))
        assert.strictEqual(impatient._tag, "TimedOut")
        assert.deepStrictEqual(yield* waiterIds(server, "k"), [])
        // The server sleeps: the waiter's first attempt waits in its connection, runs after the call
        // gave up (its reply never read), and registers the waiter as busy replies do.
        yield* Faults.debugSleep(server, 1.5)
        const gaveUp = yield* Effect.flip(waiter.withLock("k", { waitTimeout: "200 millis" })(Effect.void))
        assert.strictEqual(gaveUp._tag, "TimedOut")
        // Once the server is awake and has run everything the waiter sent (the attempt, then its
        // withdrawal on the same connection), nobody is left in the line. A registration left behind
        // would stay for its whole lifetime (2.5 s with this lease) and be handed the next release.
        yield* server.command("PING")
        let left: Array<string> = []
        for (let i = 0; i < 100; i++) {
          left = yield* waiterIds(server, "k")
          if (left.length === 0) break
          yield* Effect.sleep(10)
        }
        assert.deepStrictEqual(left, [], "the departed waiter withdrew the registration its last attempt made")
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(held)
      })
    )

    it.live("a key that expires under waiters whose process is gone goes to the live waiter behind them", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const backend = yield* NodeRedisBackend.make({ url: server.url })
        const waiter = yield* clientOver(backend)
        // A holder that died: its lease runs out in 300 ms, and no release will serve anyone.
        yield* server.command("SET", lockKeyOf("k"), "dead-holder", "PX", "300")
        // Two waiters registered ahead of the live one, for 10 s, whose processes are gone.
        for (const id of ["g.dead", "w.dead"]) {
          const reply = yield* backend.acquire({
            key: lockKeyOf("k"),
            token: `${id}-token`,
            leaseMillis: 30_000,
            timeoutMillis: 1_000,
            acknowledge: false,
            waiter: { id, ttlMillis: 10_000 }
          })
          assert.strictEqual(reply._tag, "Busy")
        }
        const startedAt = performance.now()
        const enteredAfter = yield* waiter.withLock("k", { waitTimeout: "5 seconds" })(
          Effect.sync(() => performance.now() - startedAt)
        )
        // At the expiry (its last busy reply said when), not when the dead registrations lapse.
        assert.isBelow(enteredAfter, 1_500, `entered ${Math.round(enteredAfter)} ms after it began to wait`)
        assert.deepStrictEqual(
          yield* waiterIds(server, "k"),
          ["g.dead", "w.dead"],
          "the gone waiters keep their places until they lapse"
        )
      })
    )

    it.live("a user who may not subscribe gets NOPERM at once, not a loop of attempts and refused SUBSCRIBEs", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        // Everything a lock user needs but the wake-up channels.
        yield* server.command(
          "ACL",
          "SETUSER",
          "nosub",
          "on",
          ">secret",
          "resetkeys",
          `~${namespace}:*`,
          "resetchannels",
          "+@all"
        )
        const backend = yield* NodeRedisBackend.make({ url: server.url, username: "nosub", password: "secret" })
        const lock = yield* clientOver(backend)
        yield* server.command("SET", lockKeyOf("k"), "holder", "PX", "30000")
        const before = yield* server.command("INFO", "commandstats")
        const startedAt = performance.now()
        const error = yield* Effect.flip(lock.withLock("k", { waitTimeout: "3 seconds" })(Effect.void))
        const took = performance.now() - startedAt
        const after = yield* server.command("INFO", "commandstats")
        assert(error._tag === "LockRedisError", `${error._tag}: ${error.message}`)
        assert.strictEqual(error.code, "NOPERM")
        assert.isBelow(took, 1_500, "refused at once, not after the wait")
        const attempts = callsOf(after, "evalsha") - callsOf(before, "evalsha")
        const subscribes = callsOf(after, "subscribe") - callsOf(before, "subscribe")
        // One busy attempt registers; the refusal ends the call (its withdrawal is one more script).
        assert.isAtMost(attempts, 3, `scripts run: ${attempts}`)
        assert.isAtMost(subscribes, 1, `SUBSCRIBEs: ${subscribes}`)
        assert.deepStrictEqual(yield* waiterIds(server, "k"), [], "the refused waiter left the line")
      })
    )

    it.live("a subscriber that cannot connect leaves the waiter polling at its usual pace, then it acquires", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const admin = yield* adminClient(server)
        const backend = yield* NodeRedisBackend.make({ url: server.url, connections: 1 })
        const lock = yield* clientOver(backend)
        yield* Effect.promise(() => admin.set(lockKeyOf("k"), "holder", { PX: 30_000 }))
        // No room for the wake-up subscriber's connection: the server refuses it ("max number of
        // clients reached"), a temporary refusal.
        const connected = /connected_clients:(\d+)/.exec(String(yield* Effect.promise(() => admin.info("clients"))))
        yield* Effect.promise(() => admin.configSet("maxclients", String(Number(connected?.[1]))))
        const before = yield* Effect.promise(() => admin.info("commandstats"))
        const waiting = yield* Effect.forkChild(lock.withLock("k", { waitTimeout: "10 seconds" })(Effect.void))
        yield* Effect.sleep(2_000)
        const during = yield* Effect.promise(() => admin.info("commandstats"))
        // With a 30 s lease the waiter polls every 0.5-1 s (one attempt, one try to subscribe): a
        // handful in two seconds, where a loop would have made thousands.
        const attempts = callsOf(during, "evalsha") - callsOf(before, "evalsha")
        assert.isAtLeast(attempts, 2, `scripts run: ${attempts}`)
        assert.isAtMost(attempts, 8, `scripts run: ${attempts}`)
        yield* Effect.promise(() => admin.configSet("maxclients", "10000"))
        yield* Effect.promise(() => admin.del(lockKeyOf("k")))
        yield* Fiber.join(waiting)
      })
    )
  })
}
