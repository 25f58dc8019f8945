// The standalone backend over a client the application owns: the whole lock contract over it (on
// Redis 7; the flavors differ only in the server, which the standard suite covers), and the facts
// only this mode has: the lock adds no connection of its own until someone waits, and never closes
// the application's client.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Lock } from "@sage/lock"
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { RedisServer } from "@sage/lock-testkit"
import { createClient } from "redis"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { sharedClientTarget } from "./targets.ts"

LockContract.suite("redis7 standalone over a shared client (node-redis)", sharedClientTarget("redis7"))

/** The number of client connections the server has, the caller's own included. */
const connections = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("CLIENT", "LIST"), (list) => String(list).trim().split("\n").length)

describe("a shared client", () => {
  it.live("lock traffic uses the application's connection, and the client outlives the lock layer", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const client = createClient({ url: server.url })
      client.on("error", () => {})
      yield* Effect.promise(() => client.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => client.close()).pipe(Effect.ignore))
      const before = yield* connections(server)
      const LockLive = Lock.layer({ namespace: "shared" }).pipe(Layer.provide(NodeRedisBackend.layerFromClient(client)))
      const during = yield* Effect.gen(function* () {
        yield* Lock.withLock("k", { waitTimeout: "1 second" })(Effect.void)
        return yield* connections(server)
      }).pipe(Effect.provide(LockLive))
      assert.strictEqual(during, before, "no connection was opened for uncontended locking")
      assert.strictEqual(yield* Effect.promise(() => client.ping()), "PONG", "the client is still open")
    })
  )
})
