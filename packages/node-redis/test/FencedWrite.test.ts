// Fenced writes on real servers: a write carrying an older fencing token than the data last accepted
// is rejected, and a holder paused past its lease cannot overwrite the next holder's write.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { Lease, Lock, LockScripts } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import * as FencedWrite from "../src/FencedWrite.ts"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { connectClient } from "./clients.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`fenced writes on ${flavor}`, () => {
    it.live("accepts tokens not older than the last accepted one and rejects older ones", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connectClient(server.url)
        const key = "{account:1}:balance"
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "10", fencingToken: 5 }), {
          _tag: "Written"
        })
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "stale", fencingToken: 4 }), {
          _tag: "Stale",
          lastToken: 5
        })
        assert.strictEqual(yield* server.command("GET", key), "10", "a rejected write changes nothing")
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "11", fencingToken: 5 }), {
          _tag: "Written"
        })
        const big = 1_764_590_000_123_456
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "12", fencingToken: big }), {
          _tag: "Written"
        })
        assert.strictEqual(yield* server.command("GET", `${key}:fence`), String(big), "tokens are stored exactly")
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "x", fencingToken: big - 1 }), {
          _tag: "Stale",
          lastToken: big
        })
        assert.strictEqual(yield* server.command("GET", key), "12")
      })
    )

    it.live("a token that is not a positive integer below 2^53 writes nothing, in the client or the script", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connectClient(server.url)
        const key = "{account:3}:balance"
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "10", fencingToken: 100 }), {
          _tag: "Written"
        })
        const unchanged = Effect.gen(function* () {
          assert.strictEqual(yield* server.command("GET", key), "10", "nothing was written")
          assert.strictEqual(yield* server.command("GET", `${key}:fence`), "100", "the last token is kept")
        })
        for (const fencingToken of [Number.NaN, Number.POSITIVE_INFINITY, 1.5, 0, -5, 2 ** 53, "7" as never]) {
          const refused = yield* Effect.flip(FencedWrite.set(client, { key, value: "bad", fencingToken }))
          assert.strictEqual(refused._tag, "InvalidArgument", String(fencingToken))
          assert.strictEqual((refused as { field?: string }).field, "fencingToken")
          yield* unchanged
        }
        for (const options of [
          { key: "", value: "bad", fencingToken: 200 },
          { key, value: 5 as never, fencingToken: 200 },
          { key, value: "bad", fencingToken: 200, fenceKey: "" },
          { key, value: "bad", fencingToken: 200, timeoutMillis: Number.NaN },
          { key, value: "bad", fencingToken: 200, timeoutMillis: 0 }
        ]) {
          const refused = yield* Effect.flip(FencedWrite.set(client, options))
          assert.strictEqual(refused._tag, "InvalidArgument", JSON.stringify(options))
          yield* unchanged
        }
        // The script refuses them too (it is public as LockScripts.fencedSet): Lua's tonumber reads
        // NaN and Infinity, which would otherwise bypass the fence or block every later writer.
        for (const token of ["NaN", "Infinity", "-inf", "1.5", "0", "-5", "9007199254740992", "1e400", "seven"]) {
          const reply = yield* Effect.flip(
            server.command("EVAL", LockScripts.fencedSet, "2", key, `${key}:fence`, token, "bad")
          )
          assert.include(String(reply), "fencing token must be a positive integer", token)
          yield* unchanged
        }
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "11", fencingToken: 101 }), {
          _tag: "Written"
        })
      })
    )

    it.live("a holder paused past its lease cannot overwrite the next holder's write", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connectClient(server.url)
        const backend = yield* NodeRedisBackend.make({ url: server.url })
        const LockLive = Lock.layer({ namespace: "bank", leaseDuration: "300 millis" }).pipe(
          Layer.provide(Layer.succeed(LockBackend, backend))
        )
        const data = "{account:42}:balance"
        // The paused holder: it was granted the lock, then stopped (no renewal) past its lease.
        const paused = yield* backend.acquire({
          key: "bank:{account:42}",
          token: "paused-holder",
          leaseMillis: 300,
          timeoutMillis: 1_000,
          acknowledge: false
        })
        assert.strictEqual(paused._tag, "Acquired")
        const pausedToken = paused._tag === "Acquired" ? paused.fence : 0
        // The next holder gets the lock once the lease has expired, and writes.
        const next = yield* Effect.gen(function* () {
          const token = yield* Lease.fencingToken
          return yield* FencedWrite.set(client, { key: data, value: "110", fencingToken: token })
        }).pipe(Lock.withLock("account:42", { waitTimeout: "2 seconds" }), Effect.provide(LockLive))
        assert.deepStrictEqual(next, { _tag: "Written" })
        // The paused holder wakes up and writes what it computed before its pause.
        const late = yield* FencedWrite.set(client, { key: data, value: "100", fencingToken: pausedToken })
        assert.strictEqual(late._tag, "Stale")
        assert.strictEqual(yield* server.command("GET", data), "110", "the later holder's write stands")
      })
    )

    it.live("a write already on its way when the lock was lost is rejected, and its call fails with LockLost", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connectClient(server.url)
        const backend = yield* NodeRedisBackend.make({ url: server.url })
        // Two clients, as two processes would be (one client would queue its own calls).
        const [holder, next] = yield* Effect.forEach([1, 2], () =>
          Lock.make({ namespace: "bank", leaseDuration: "1 second" }).pipe(Effect.provideService(LockBackend, backend))
        )
        const data = "{account:7}:balance"
        yield* Effect.gen(function* () {
          const inside = yield* Deferred.make<void>()
          const go = yield* Deferred.make<void>()
          // The first holder's write cannot be stopped once started (uninterruptible, like a request
          // already sent); it is held back until the lock has moved on.
          const first = yield* Effect.forkChild(
            Effect.gen(function* () {
              const token = yield* Lease.fencingToken
              yield* Deferred.succeed(inside, undefined)
              return yield* Effect.uninterruptible(
                Effect.andThen(
                  Deferred.await(go),
                  FencedWrite.set(client, { key: data, value: "first", fencingToken: token })
                )
              )
            }).pipe(holder!.withLock("account:7", { waitTimeout: "2 seconds" }), Effect.result)
          )
          yield* Deferred.await(inside)
          // The lock key vanishes (a failover that lost it, an eviction): the next holder gets in.
          yield* server.command("DEL", "bank:{account:7}")
          const second = yield* Effect.gen(function* () {
            const token = yield* Lease.fencingToken
            return yield* FencedWrite.set(client, { key: data, value: "second", fencingToken: token })
          }).pipe(next!.withLock("account:7", { waitTimeout: "2 seconds" }))
          assert.deepStrictEqual(second, { _tag: "Written" })
          yield* Deferred.succeed(go, undefined)
          const outcome = yield* Fiber.join(first)
          assert.strictEqual(outcome._tag, "Failure", "the first call does not succeed")
          if (outcome._tag === "Failure") assert.strictEqual(outcome.failure._tag, "LockLost")
          assert.strictEqual(yield* server.command("GET", data), "second", "the stale write was rejected")
        })
      })
    )
  })
}
