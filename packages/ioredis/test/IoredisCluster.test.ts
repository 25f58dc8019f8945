// The Cluster backend over ioredis, beyond the contract: wake-ups on every master's shard, replica
// acknowledgement read from ioredis's slot map, a held lock across a failover, what closes with the
// layer (and what never does), and bad input.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ClusterTopology, FaultProxy, Faults, type RedisServer, ServerBinary } from "@sage/lock-testkit"
import { heldAcrossFailover } from "@sage/lock-testkit/contract/HeldAcrossFailover"
import * as ReplicaAcknowledgement from "@sage/lock-testkit/contract/ReplicaAcknowledgement"
import {
  clientOver,
  handoff,
  median,
  show,
  wakeupsComeBackAfterStall,
  wokenWithinMillis
} from "@sage/lock-testkit/contract/Handoff"
import * as IoredisBackend from "../src/IoredisBackend.ts"
import { ownedCluster } from "./targets.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

/** A lock client over `backend`, as one process would have. */
const clientOn = (backend: LockBackend["Service"], options: Lock.LockOptions = {}) =>
  Lock.make({ namespace: "ioc", ...options }).pipe(Effect.provideService(LockBackend, backend))

/** `connected_clients` from `INFO clients` (the test kit's own connection included). */
const connectedClients = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("INFO", "clients"), (info) => Number(/connected_clients:(\d+)/.exec(String(info))?.[1]))

/** Channels with at least one shard subscriber on `server`. */
const shardChannels = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("PUBSUB", "SHARDCHANNELS"), (reply) => (Array.isArray(reply) ? reply.map(String) : []))

/** Polls `read` until `done` holds of it, for at most `millis`; answers the last value read. */
const eventually = <A, E>(read: Effect.Effect<A, E>, done: (a: A) => boolean, millis = 5_000) =>
  Effect.gen(function* () {
    const start = Date.now()
    let value = yield* read
    while (!done(value) && Date.now() - start < millis) {
      yield* Effect.sleep(50)
      value = yield* read
    }
    return value
  })

/** The field of the `InvalidArgument` `effect` fails with. */
const invalid = (effect: Effect.Effect<unknown, unknown, never>) =>
  Effect.map(Effect.flip(effect), (error) => {
    assert.strictEqual((error as { _tag: string })._tag, "InvalidArgument")
    return (error as { field: string }).field
  })

const scoped = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Effect.scoped(effect)

/** One key per master (by the test kit's view of the slots), `count` in all. */
const keysOnEveryMaster = (topology: ClusterTopology.ClusterTopology, count: number) =>
  Effect.gen(function* () {
    const keys: Array<string> = []
    const masters = new Set<number>()
    for (let i = 0; keys.length < count && i < 1_000; i++) {
      const master = yield* topology.masterFor(`wake:{c${i}}`)
      if (masters.size < 3 && masters.has(master.port)) continue
      masters.add(master.port)
      keys.push(`c${i}`)
    }
    assert.strictEqual(masters.size, 3, "keys on all three masters")
    return keys
  })

describe(`ioredis cluster on ${flavor}`, () => {
  it.live(
    "a release wakes a waiter of another process on the key's own shard, on every master",
    () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor: flavor!, nodeTimeoutMillis: 8_000 })
        // One process with a cluster client of its own, the other over the application's.
        const a = yield* Effect.flatMap(IoredisBackend.makeCluster(topology.rootNodes), clientOver)
        const shared = yield* ownedCluster(topology.rootNodes)
        const b = yield* Effect.flatMap(IoredisBackend.fromClient(shared), clientOver)
        const keys = yield* keysOnEveryMaster(topology, 6)
        const gaps: Array<number> = []
        for (const [i, key] of keys.entries()) {
          gaps.push(yield* handoff((lockKey) => topology.masterFor(lockKey), i % 2 ? a : b, i % 2 ? b : a, key))
        }
        assert.isBelow(median(gaps), wokenWithinMillis, `handoff ms: ${show(gaps)}`)
        // The waiters subscribed on the shard of their key's master, not anywhere else.
        const owner = yield* topology.masterFor(`wake:{${keys[0]}}`)
        const held = yield* Deferred.make<void>()
        const waiting = yield* Effect.forkChild(
          a.withLock(keys[0]!, { waitTimeout: "10 seconds" })(Deferred.await(held))
        )
        const waiter = yield* Effect.forkChild(b.withLock(keys[0]!, { waitTimeout: "10 seconds" })(Effect.void))
        const channels = yield* eventually(shardChannels(owner), (list) => list.some((c) => c.includes(":wake:w.")))
        assert.isTrue(
          channels.some((channel) => channel.includes(":wake:w.")),
          `a wake channel on the key's master: ${channels}`
        )
        yield* Deferred.succeed(held, undefined)
        yield* Fiber.join(waiting)
        yield* Fiber.join(waiter)
      }),
    120_000
  )

  it.live(
    "a master's sharded subscriber connection that goes silent is closed, ioredis opens another, and wake-ups resume",
    () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor: flavor!, nodeTimeoutMillis: 8_000 })
        const a = yield* Effect.flatMap(IoredisBackend.makeCluster(topology.rootNodes), clientOver)
        // The waiter reaches every node through a proxy of its own (ioredis's natMap); a 5 s lease
        // keeps the 1 s backoff cap `handoff` counts on.
        const proxies = yield* Effect.forEach(topology.nodes, (node) => FaultProxy.make({ upstreamPort: node.port }))
        const natMap = Object.fromEntries(
          topology.nodes.map((node, i) => [`127.0.0.1:${node.port}`, { host: "127.0.0.1", port: proxies[i]!.port }])
        )
        const backend = yield* IoredisBackend.makeCluster(
          proxies.slice(0, 3).map((proxy) => ({ host: "127.0.0.1", port: proxy.port })),
          { natMap }
        )
        const b = yield* clientOn(backend, { namespace: "wake", leaseDuration: "5 seconds" })
        // Every connection the waiter has open then forwards nothing; new ones pass. Its subscriber is
        // replaced once a wait that ran out has had its PING unanswered for 5 s (ioredis opens another).
        yield* wakeupsComeBackAfterStall((lockKey) => topology.masterFor(lockKey), a, b, "q", proxies, 40_000)
      }),
    120_000
  )

  it.live("WAIT asks for every replica ioredis lists for the shard: one of two stalled means unacknowledged", () =>
    ReplicaAcknowledgement.everyReplicaCounts(flavor!, (topology) => IoredisBackend.makeCluster(topology.rootNodes))
  )

  it.live(
    "a held lock survives a failover: ioredis's slot map moves, and renewal follows it to the promoted master",
    () =>
      Effect.gen(function* () {
        const topology = yield* ClusterTopology.start({ flavor: flavor!, nodeTimeoutMillis: 8_000 })
        const shared = yield* ownedCluster(topology.rootNodes)
        const backend = yield* IoredisBackend.fromClient(shared)
        // The lease must outlast the failover (renewals fail while the master switches): 8 s.
        const lock = yield* clientOn(backend, { leaseDuration: "8 seconds" })
        yield* heldAcrossFailover(
          lock,
          "survivor",
          (key) => topology.masterFor(key),
          (key) => Effect.flatMap(topology.replicaFor(key), (replica) => ClusterTopology.failover(topology, replica))
        )
      }),
    120_000
  )

  it.live("a master at its client limit refuses the lock's new connections for a while: retried, never CLOSED", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: flavor!, nodeTimeoutMillis: 8_000 })
      const backend = yield* IoredisBackend.makeCluster(topology.rootNodes)
      const lock = yield* clientOn(backend, { replicaAcknowledgement: false })
      const master = yield* topology.masterFor(`${lock.namespace}:{limited}`)
      // maxclients 1 (its own connection) and every other client killed, for 1.5 s.
      const limited = yield* Effect.forkChild(Faults.connectionLimit(master, 1_500))
      yield* Effect.sleep("300 millis")
      const value = yield* lock.withLock("limited", { waitTimeout: "8 seconds" })(Effect.succeed("in"))
      assert.strictEqual(value, "in")
      yield* Fiber.join(limited)
    })
  )

  it.live("the application's Cluster stays open after the layer closes; the lock's connections all close", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: flavor!, nodeTimeoutMillis: 8_000 })
      const shared = yield* ownedCluster(topology.rootNodes)
      const masters = yield* Effect.forEach(["a", "b", "c", "d", "e", "f"], (key) => topology.masterFor(`ioc:{${key}}`))
      const before = yield* Effect.forEach(topology.nodes, connectedClients)
      yield* Effect.gen(function* () {
        const lock = yield* Lock.make({ namespace: "ioc" })
        // Locks on every master, some waited for (so the subscriber opens too).
        yield* Effect.forEach(
          ["a", "b", "c", "d", "e", "f"],
          (key) =>
            Effect.all(
              [
                lock.withLock(key, { waitTimeout: "5 seconds" })(Effect.sleep("50 millis")),
                lock.withLock(key, { waitTimeout: "5 seconds" })(Effect.void)
              ],
              { concurrency: "unbounded" }
            ),
          { concurrency: "unbounded" }
        )
        const during = yield* Effect.forEach(masters, connectedClients)
        assert.isTrue(
          during.some((count, i) => count > before[topology.nodes.indexOf(masters[i]!)]!),
          "the lock opened connections of its own"
        )
      }).pipe(Effect.provide(IoredisBackend.layerFromClient(shared)), Effect.scoped)
      const after = yield* eventually(Effect.forEach(topology.nodes, connectedClients), (counts) =>
        counts.every((count, i) => count <= before[i]!)
      )
      assert.deepStrictEqual(after, before, "every connection the lock opened is closed")
      assert.strictEqual(shared.status, "ready")
      assert.strictEqual(yield* Effect.promise(() => shared.ping()), "PONG")
    })
  )

  it.live("bad options and a cluster that never answers fail the layer with typed errors", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* invalid(scoped(IoredisBackend.makeCluster([]))), "nodes")
      assert.strictEqual(
        yield* invalid(scoped(IoredisBackend.makeCluster([{ host: "127.0.0.1", port: 1 }], { maxConnections: 0 }))),
        "maxConnections"
      )
      assert.strictEqual(
        yield* invalid(
          scoped(IoredisBackend.makeCluster([{ host: "127.0.0.1", port: 1 }], { connectTimeoutMillis: -1 }))
        ),
        "connectTimeoutMillis"
      )
      // A root node that takes connections and never answers: the layer fails within its bound.
      const port = yield* Faults.silentPeer
      const start = Date.now()
      const error = yield* scoped(
        IoredisBackend.makeCluster([{ host: "127.0.0.1", port }], { connectTimeoutMillis: 500 })
      ).pipe(Effect.flip, Effect.timeout("20 seconds"))
      assert.isBelow(Date.now() - start, 2_000)
      assert.strictEqual(error._tag, "LockRedisError")
      if (error._tag === "LockRedisError") assert.isTrue(error.retryable)
    })
  )
})
