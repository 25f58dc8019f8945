// The backend over Effect's own `Redis` service, as `NodeRedis.layer` from @effect/platform-node
// provides it: the whole lock contract over it (Redis 7; the flavors differ only in the server,
// which the standard suite covers), with and without wake-ups, and what only this mode claims: lock
// commands travel on the app's one connection (counted on the server), the app's Redis outlives the
// lock layer, and wake-ups cost one subscriber connection (over NodeRedis) or one per key being
// waited for (over another Redis implementation).
import { NodeRedis } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redis from "effect/persistence/Redis"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerControl } from "@sage/lock-testkit/contract/ServerControl"
import { RedisServer } from "@sage/lock-testkit"
import * as EffectRedisBackend from "../src/EffectRedisBackend.ts"
import { controlFor } from "./targets.ts"
import { clientOver, handoff, wokenWithinMillis } from "@sage/lock-testkit/contract/Handoff"

const target = (options: EffectRedisBackend.Options): Layer.Layer<LockBackend | ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const backend = yield* Layer.build(
        EffectRedisBackend.layer(options).pipe(Layer.provide(NodeRedis.layer({ url: server.url })))
      )
      return backend.pipe(Context.add(ServerControl, controlFor(server)))
    })
  )

LockContract.suite("redis7 over Effect's Redis service (NodeRedis.layer)", target({}))
LockContract.suite("redis7 over Effect's Redis service with wake-ups", target({ wakeups: true }))

/** `connected_clients` from `INFO clients`: every connection the server has, the test kit's own included. */
const connectedClients = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("INFO", "clients"), (info) => Number(/connected_clients:(\d+)/.exec(String(info))?.[1]))

/** The last command each connection ran, by client id (`CLIENT LIST`). */
const lastCommands = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("CLIENT", "LIST"), (list) =>
    String(list)
      .trim()
      .split("\n")
      .map((line) => ({ id: /\bid=(\d+)/.exec(line)?.[1], cmd: /\bcmd=(\S+)/.exec(line)?.[1] }))
  )

/** The backend over `NodeRedis.layer` on `server`, with the app's `Redis` service beside it. */
const over = (server: RedisServer.RedisServer, options: EffectRedisBackend.Options = {}) =>
  EffectRedisBackend.layer(options).pipe(Layer.provideMerge(NodeRedis.layer({ url: server.url })))

/** Two clients hand two keys to each other over the backend in context; the gaps and the server's connection count. */
const twoHandoffs = (server: RedisServer.RedisServer) =>
  Effect.gen(function* () {
    const backend = yield* LockBackend
    const [a, b] = yield* Effect.all([clientOver(backend), clientOver(backend)])
    const gaps = [yield* handoff(() => Effect.succeed(server), a, b, "k1")]
    gaps.push(yield* handoff(() => Effect.succeed(server), b, a, "k2"))
    return { gaps, connections: yield* connectedClients(server) }
  })

describe("the backend over Effect's Redis service", () => {
  it.live("lock commands, contention between two clients and renewal add no connection to the app's one", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const baseline = yield* connectedClients(server)
      const counts = yield* Effect.gen(function* () {
        const redis = yield* Redis.Redis
        const withRedis = yield* connectedClients(server)
        const appId = String(yield* redis.send("CLIENT", "ID"))
        const backend = yield* LockBackend
        // Two lock clients (as two processes would be) contend through the server; the holder
        // outlives several leases, so renewals run too.
        const [a, b] = yield* Effect.all([clientOver(backend), clientOver(backend)])
        const holder = yield* Effect.forkChild(a.withLock("k", { waitTimeout: "2 seconds" })(Effect.sleep(700)))
        yield* Effect.sleep(100)
        const whileBusy = yield* connectedClients(server)
        yield* b.withLock("k", { waitTimeout: "5 seconds" })(Effect.void)
        yield* Fiber.join(holder)
        const after = yield* connectedClients(server)
        const commands = yield* lastCommands(server)
        return { withRedis, whileBusy, after, appId, commands }
      }).pipe(Effect.provide(over(server)))
      assert.strictEqual(counts.withRedis, baseline + 1, "NodeRedis.layer opens one connection")
      assert.strictEqual(counts.whileBusy, baseline + 1, "contention and renewal open none")
      assert.strictEqual(counts.after, baseline + 1, "releasing and re-acquiring open none")
      const app = counts.commands.find((connection) => connection.id === counts.appId)
      assert.strictEqual(app?.cmd, "evalsha", "the app's connection carried the lock scripts")
    })
  )

  it.live("the app's Redis outlives the lock layer built over it", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const redis = yield* Layer.build(NodeRedis.layer({ url: server.url }))
      const LockLive = Lock.layer({ namespace: "effect-redis" }).pipe(Layer.provide(EffectRedisBackend.layer()))
      yield* Lock.withLock("k", { waitTimeout: "1 second" })(Effect.void).pipe(
        Effect.provide(LockLive, { local: true }),
        Effect.provide(redis)
      )
      const pong = yield* Effect.flatMap(Redis.Redis, (r) => r.send("PING")).pipe(Effect.provide(redis))
      assert.strictEqual(pong, "PONG")
    })
  )

  it.live("options that are not an object, or wake-ups that are not a boolean, are InvalidArgument", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const redis = yield* Layer.build(NodeRedis.layer({ url: server.url }))
      for (const [options, field] of [
        [null, "options"],
        ["wakeups", "options"],
        [{ wakeups: "yes" }, "wakeups"],
        [{ wakeups: 1 }, "wakeups"]
      ] as const) {
        const error = yield* Effect.flip(
          Effect.scoped(Layer.build(EffectRedisBackend.layer(options as never))).pipe(Effect.provide(redis))
        )
        assert.strictEqual(error._tag, "InvalidArgument", JSON.stringify(options))
        assert.strictEqual(error.field, field)
      }
    })
  )

  it.live("with wake-ups over NodeRedis, releases wake other clients' waiters over one subscriber connection", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const baseline = yield* connectedClients(server)
      const result = yield* twoHandoffs(server).pipe(Effect.provide(over(server, { wakeups: true })))
      assert.strictEqual(result.connections, baseline + 2, "the app's connection and one subscriber for both keys")
      // Polling would come at least 500 ms after the release; woken, the waiter follows at once.
      for (const gap of result.gaps)
        assert.isBelow(gap, wokenWithinMillis, `handoffs took ${result.gaps.map((g) => g.toFixed(1))} ms`)
    })
  )

  it.live("with wake-ups over a Redis service that is not NodeRedis, each waited key has its own subscription", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7" })
      const baseline = yield* connectedClients(server)
      // Only `Redis` in context (NodeRedis hidden), as another implementation would provide it.
      const redisOnly = Layer.effect(
        Redis.Redis,
        Effect.gen(function* () {
          return yield* Redis.Redis
        })
      ).pipe(Layer.provide(NodeRedis.layer({ url: server.url })))
      const result = yield* twoHandoffs(server).pipe(
        Effect.provide(EffectRedisBackend.layer({ wakeups: true }).pipe(Layer.provide(redisOnly)))
      )
      assert.strictEqual(result.connections, baseline + 3, "the app's connection and one subscription per key")
      for (const gap of result.gaps)
        assert.isBelow(gap, wokenWithinMillis, `handoffs took ${result.gaps.map((g) => g.toFixed(1))} ms`)
    })
  )
})
