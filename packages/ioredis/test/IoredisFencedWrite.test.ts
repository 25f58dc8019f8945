// Fenced writes over ioredis on real servers: a write carrying an older fencing token than the data
// last accepted is rejected, bad options write nothing, a Cluster client routes the script by its
// keys, and the lock's own token fences the write (the same script as node-redis's FencedWrite).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Cluster } from "ioredis"
import { Lease, Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, RedisServer, ServerBinary } from "@sage/lock-testkit"
import * as FencedWrite from "../src/IoredisFencedWrite.ts"
import * as IoredisBackend from "../src/IoredisBackend.ts"
import { ownedClient } from "./targets.ts"

const flavor = ServerBinary.flavorsUnderTest()[0]!

describe("IoredisFencedWrite", () => {
  it.live("accepts tokens not older than the last accepted one, rejects older ones, and checks its options", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const redis = yield* ownedClient(server.url)
      const key = "{account:1}:balance"
      assert.deepStrictEqual(yield* FencedWrite.set(redis, { key, value: "10", fencingToken: 5 }), { _tag: "Written" })
      assert.deepStrictEqual(yield* FencedWrite.set(redis, { key, value: "stale", fencingToken: 4 }), {
        _tag: "Stale",
        lastToken: 5
      })
      assert.strictEqual(yield* server.command("GET", key), "10", "a rejected write changes nothing")
      assert.deepStrictEqual(yield* FencedWrite.set(redis, { key, value: "11", fencingToken: 5 }), { _tag: "Written" })
      for (const [options, field] of [
        [{ key, value: "bad", fencingToken: 1.5 }, "fencingToken"],
        [{ key, value: "bad", fencingToken: 2 ** 53 }, "fencingToken"],
        [{ key: "", value: "bad", fencingToken: 9 }, "key"],
        [{ key, value: "bad", fencingToken: 9, timeoutMillis: 0 }, "timeoutMillis"],
        [null as never, "options"]
      ] as const) {
        const refused = yield* Effect.flip(FencedWrite.set(redis, options))
        assert.strictEqual(refused._tag, "InvalidArgument", JSON.stringify(options))
        assert.strictEqual((refused as { field?: string }).field, field)
      }
      assert.strictEqual(yield* server.command("GET", key), "11", "refused options wrote nothing")
      // A refused script is the server's reply, read as the lock reads ioredis's errors.
      yield* server.command("ACL", "SETUSER", "no-scripts", "on", ">pw", "~*", "+@all", "-evalsha", "-eval")
      const limited = yield* ownedClient(server.url.replace("redis://", "redis://no-scripts:pw@"))
      const denied = yield* Effect.flip(FencedWrite.set(limited, { key, value: "12", fencingToken: 6 }))
      assert.strictEqual(denied._tag, "LockRedisError")
      assert.strictEqual((denied as { code?: string }).code, "NOPERM")
    })
  )

  it.live("a Cluster client routes the write to the data key's node", () =>
    Effect.gen(function* () {
      const cluster = yield* ClusterTopology.start({ flavor, replicasPerMaster: 0 })
      const client = yield* Effect.acquireRelease(
        Effect.sync(() => new Cluster(cluster.nodes.map((node) => ({ host: "127.0.0.1", port: node.port })))),
        (client) => Effect.promise(() => client.quit().catch(() => undefined))
      )
      for (const [index, account] of ["a", "b", "c", "d"].entries()) {
        const key = `{account:${account}}:balance`
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: String(index), fencingToken: 10 }), {
          _tag: "Written"
        })
        assert.deepStrictEqual(yield* FencedWrite.set(client, { key, value: "stale", fencingToken: 9 }), {
          _tag: "Stale",
          lastToken: 10
        })
        assert.strictEqual(yield* Effect.promise(() => client.get(key)), String(index))
      }
    })
  )

  it.live("the lease's fencing token fences the holder's write", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const redis = yield* ownedClient(server.url)
      const backend = yield* IoredisBackend.make({ host: "127.0.0.1", port: server.port })
      const lock = yield* Lock.make({ namespace: "fenced" }).pipe(Effect.provideService(LockBackend, backend))
      const write = (value: string) =>
        Effect.flatMap(Lease.fencingToken, (fencingToken) =>
          FencedWrite.set(redis, { key: "{job}:state", value, fencingToken })
        ).pipe(lock.withLock("job", { waitTimeout: "2 seconds" }))
      const first = yield* write("first")
      const second = yield* write("second")
      assert.deepStrictEqual([first, second], [{ _tag: "Written" }, { _tag: "Written" }])
      // A write with the first grant's token after the second's is older, and refused.
      const fence = Number(yield* server.command("GET", "{job}:state:fence"))
      assert.deepStrictEqual(
        yield* FencedWrite.set(redis, { key: "{job}:state", value: "late", fencingToken: fence - 1 }),
        {
          _tag: "Stale",
          lastToken: fence
        }
      )
    })
  )
})
