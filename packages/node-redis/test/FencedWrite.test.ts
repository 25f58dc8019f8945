// Fenced writes on real servers: a write carrying an older fencing token than the data last accepted
// is rejected, and a holder paused past its lease cannot overwrite the next holder's write.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Lease, Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import { createClient } from "redis"
import * as FencedWrite from "../src/FencedWrite.ts"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

const connect = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(() => {
      const client = createClient({ url })
      client.on("error", () => {})
      return client.connect()
    }),
    (client) => Effect.promise(() => client.close()).pipe(Effect.timeoutOption(1_000), Effect.ignore)
  )

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`fenced writes on ${flavor}`, () => {
    it.live("accepts tokens not older than the last accepted one and rejects older ones", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connect(server.url)
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

    it.live("a holder paused past its lease cannot overwrite the next holder's write", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connect(server.url)
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
  })
}
