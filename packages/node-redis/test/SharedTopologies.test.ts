// The Sentinel and Cluster backends over clients the application owns: the whole lock contract over
// each (on Redis 7; the flavors differ only in the server, which Replicated.contract covers), and
// what only this mode has: the lock opens no connection to the sentinels, wakes waiters over the
// application's pub/sub, drops its subscriptions when its layer closes, and never closes the client.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import { LockBackend } from "@sage/lock/LockBackend"
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ClusterTopology, type RedisServer, SentinelTopology } from "@sage/lock-testkit"
import { createSentinel } from "redis"
import * as SharedSentinel from "../src/internal/replicated/sentinel/sharedSentinel.ts"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { connectCluster } from "./clients.ts"
import { clientOn, holding } from "./support.ts"
import { sharedClusterTarget, sharedSentinelTarget } from "./targets.ts"
import { clientOver, handoff, wokenWithinMillis } from "@sage/lock-testkit/contract/Handoff"

LockContract.suite("redis7 sentinel over a shared client (node-redis)", sharedSentinelTarget("redis7"))
LockContract.suite("redis7 cluster over a shared client (node-redis)", sharedClusterTarget("redis7"))

/** `connected_clients` from `INFO clients` (the test kit's own connection included). */
const connectedClients = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("INFO", "clients"), (info) => Number(/connected_clients:(\d+)/.exec(String(info))?.[1]))

/** Channels with at least one subscriber on `server` (`PUBSUB CHANNELS` or `PUBSUB SHARDCHANNELS`). */
const channels = (server: RedisServer.RedisServer, kind: "CHANNELS" | "SHARDCHANNELS") =>
  Effect.map(server.command("PUBSUB", kind), (reply) => (Array.isArray(reply) ? reply.map(String) : []))

/**
 * What node-redis's Sentinel client reports about a master's replicas: each with its number of ready
 * connections (with `replicaPoolSize` > 0, right after a failover, listed before they are back).
 */
const reporting = (replicaConnections: ReadonlyArray<number>): SharedSentinel.SentinelClient => ({
  isOpen: true,
  getMasterNode: () => ({ host: "127.0.0.1", port: 7000 }),
  getReplicaNodes: () => new Map(replicaConnections.map((count, i) => [{ host: "127.0.0.1", port: 7001 + i }, count])),
  subscribe: () => Promise.resolve(),
  unsubscribe: () => Promise.resolve()
})
const routeOf = (client: SharedSentinel.SentinelClient) => Result.getOrThrow(SharedSentinel.topology(client).route("k"))

describe("the view of a shared Sentinel client", () => {
  it("counts listed replicas without a ready connection as known: a write waits for them, not NO_REPLICAS", () => {
    const reattaching = routeOf(reporting([0, 0]))
    assert.strictEqual(reattaching.replicas, 0)
    assert.strictEqual(reattaching.knownReplicas, 2)
    const back = routeOf(reporting([1, 0]))
    assert.strictEqual(back.replicas, 1)
    assert.strictEqual(back.knownReplicas, 2)
    // Without replica connections the client knows no replicas: the master's own list counts.
    assert.strictEqual(routeOf(reporting([])).replicas, undefined)
  })
})

describe("a shared Sentinel client", () => {
  it.live("wakes waiters over the client's pub/sub, opens no sentinel connection, and leaves the client open", () =>
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor: "redis7", downAfterMillis: 8_000 })
      const master = yield* topology.master()
      const sentinel = createSentinel({ name: topology.masterName, sentinelRootNodes: topology.sentinelNodes })
      sentinel.on("error", () => {})
      yield* Effect.promise(() => sentinel.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => sentinel.close()).pipe(Effect.ignore))
      const sentinelsBefore = yield* Effect.forEach(topology.sentinels, connectedClients)
      const { gap, sentinelsDuring, subscribed } = yield* Effect.gen(function* () {
        const backend = yield* LockBackend
        const [a, b] = yield* Effect.all([clientOver(backend), clientOver(backend)])
        const gap = yield* handoff(() => Effect.succeed(master), a, b, "k")
        return {
          gap,
          sentinelsDuring: yield* Effect.forEach(topology.sentinels, connectedClients),
          subscribed: yield* channels(master, "CHANNELS")
        }
      }).pipe(Effect.provide(NodeRedisBackend.layerFromSentinel(sentinel), { local: true }))
      assert.isBelow(gap, wokenWithinMillis, `woken through the shared pub/sub: handoff took ${gap.toFixed(1)} ms`)
      assert.deepStrictEqual(sentinelsDuring, sentinelsBefore, "the lock connected to no sentinel")
      assert.isTrue(
        subscribed.some((channel) => channel.includes(":wake:w.")),
        `the waiter's own wake channel was subscribed: ${subscribed}`
      )
      const after = yield* channels(master, "CHANNELS")
      assert.isFalse(
        after.some((channel) => channel.includes(":wake:w.")),
        `the lock's channels were dropped with its layer: ${after}`
      )
      assert.strictEqual(yield* Effect.promise(() => sentinel.ping()), "PONG", "the client is still open")
    })
  )

  it.live("a held lock survives a failover: the client's view moves, and renewal follows it to the new master", () =>
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor: "redis7" })
      const sentinel = createSentinel({ name: topology.masterName, sentinelRootNodes: topology.sentinelNodes })
      sentinel.on("error", () => {})
      yield* Effect.promise(() => sentinel.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => sentinel.close()).pipe(Effect.ignore))
      const backend = yield* NodeRedisBackend.fromSentinel(sentinel)
      // The lease must outlast the failover (renewals fail while the master switches): 8 s.
      const lock = yield* clientOn(backend, { leaseDuration: "8 seconds" })
      const held = yield* holding(lock, "survivor", Effect.sleep("10 seconds").pipe(Effect.as("done")))
      const old = yield* topology.master()
      const promoted = yield* SentinelTopology.failover(topology)
      assert.notStrictEqual(promoted.port, old.port)
      const result = yield* Fiber.join(held.fiber)
      assert.strictEqual(result._tag, "Success", JSON.stringify(result))
      assert.isNull(yield* promoted.command("GET", `${lock.namespace}:{survivor}`), "released on the new master")
      // New acquisitions land on the promoted master, where the client's view now points.
      yield* lock.withLock("after", { waitTimeout: "5 seconds" })(
        Effect.flatMap(promoted.command("EXISTS", `${lock.namespace}:{after}`), (exists) =>
          Effect.sync(() => assert.strictEqual(Number(exists), 1, "held on the promoted master"))
        )
      )
    })
  )

  it.effect("a client that is not connected fails the layer with InvalidArgument", () =>
    Effect.gen(function* () {
      const sentinel = createSentinel({ name: "mymaster", sentinelRootNodes: [{ host: "127.0.0.1", port: 1 }] })
      const error = yield* Layer.build(NodeRedisBackend.layerFromSentinel(sentinel)).pipe(Effect.flip)
      assert.strictEqual(error._tag, "InvalidArgument")
      assert.strictEqual(error.field, "sentinel")
    })
  )
})

describe("a shared Cluster client", () => {
  it.live("wakes waiters over the client's sharded pub/sub and leaves the client open", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: "redis7", nodeTimeoutMillis: 8_000 })
      const cluster = yield* connectCluster(topology)
      const nodeFor = (key: string) => topology.masterFor(key)
      const owner = yield* topology.masterFor("wake:{k}")
      const { gap, subscribed } = yield* Effect.gen(function* () {
        const backend = yield* LockBackend
        const [a, b] = yield* Effect.all([clientOver(backend), clientOver(backend)])
        const gap = yield* handoff(nodeFor, a, b, "k")
        return { gap, subscribed: yield* channels(owner, "SHARDCHANNELS") }
      }).pipe(Effect.provide(NodeRedisBackend.layerFromCluster(cluster), { local: true }))
      assert.isBelow(
        gap,
        wokenWithinMillis,
        `woken through the shared sharded pub/sub: handoff took ${gap.toFixed(1)} ms`
      )
      assert.isTrue(
        subscribed.some((channel) => channel.includes(":wake:w.")),
        `the waiter's own wake channel was subscribed: ${subscribed}`
      )
      const after = yield* channels(owner, "SHARDCHANNELS")
      assert.isFalse(
        after.some((channel) => channel.includes(":wake:w.")),
        `the lock's channels were dropped with its layer: ${after}`
      )
      assert.strictEqual(
        yield* Effect.promise(() => cluster.sendCommand("k", false, ["PING"]) as Promise<unknown>),
        "PONG"
      )
    })
  )
})
