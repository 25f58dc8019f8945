// Closing node-redis clients for good, on a real server: no socket may outlive a closed lock layer,
// or the application's process cannot exit.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import { ClusterTopology, RedisServer, ServerBinary } from "@sage/lock-testkit"
import { createClient } from "redis"
import * as Cluster from "../src/internal/replicated/cluster/cluster.ts"
import { nodeRedisDialer } from "../src/internal/pool/nodeRedisDialer.ts"
import * as Pool from "../src/internal/pool/pool.ts"
import * as Standalone from "../src/internal/standalone/connect.ts"
import { attemptGraceMillis, destroyForGood } from "../src/internal/connection/teardown.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

/**
 * The sockets of this process connected to any of `ports` that keep it alive (Node does not list
 * unreferenced handles). Other tests' servers use other ports.
 */
const socketsTo = (...ports: ReadonlyArray<number>): number =>
  (process as unknown as { _getActiveHandles: () => Array<{ remotePort?: number }> })
    ._getActiveHandles()
    .filter((handle) => handle.remotePort !== undefined && ports.includes(handle.remotePort)).length

/**
 * The client connections a server holds, the test kit's own included: a connection that was only
 * unreferenced on our side still shows here.
 */
const serverConnections = (server: RedisServer.RedisServer) =>
  Effect.map(
    server.command("CLIENT", "LIST", "TYPE", "normal"),
    (list) =>
      String(list)
        .split("\n")
        .filter((line) => line.trim().length > 0).length
  )

/** Lets a connection attempt in flight finish (or fail), then counts what is left open. */
const settledSocketsTo = (...ports: ReadonlyArray<number>) => Effect.map(Effect.sleep(300), () => socketsTo(...ports))

describe(`closing node-redis clients on ${flavor}`, () => {
  it.live("a client destroyed while it connects leaves no socket open", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: flavor! })
      const before = yield* serverConnections(server)
      const client = createClient({ url: server.url, socket: { reconnectStrategy: false } })
      client.on("error", () => {})
      const connecting = client.connect().then(
        () => "connected",
        () => "failed"
      )
      // The TCP connection is still being made: node-redis would finish it after a plain destroy().
      destroyForGood(client)
      yield* Effect.promise(() => connecting)
      assert.strictEqual(yield* settledSocketsTo(server.port), 0)
      assert.strictEqual(yield* serverConnections(server), before, "closed, not just unreferenced")
      // (`isReady` is no witness: node-redis 5 sets it after a handshake on a socket already destroyed.)
      assert.isFalse(client.isOpen)
    })
  )

  it.live("a client whose close() waits on a stalled server is destroyed, not left draining", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: flavor! })
      const client = createClient({ url: server.url, socket: { reconnectStrategy: false } })
      client.on("error", () => {})
      yield* Effect.promise(() => client.connect())
      yield* server.pause
      yield* Effect.addFinalizer(() => Effect.ignore(server.resume))
      // A command the stalled server never answers keeps close() waiting; isOpen is false meanwhile.
      client.sendCommand(["PING"]).catch(() => {})
      client.close().catch(() => {})
      assert.isFalse(client.isOpen)
      destroyForGood(client)
      // node-redis 6 destroys it; node-redis 5 refuses to, and its socket is unreferenced instead
      // (teardown.ts): either way no socket keeps the process alive.
      assert.strictEqual(yield* settledSocketsTo(server.port), 0)
    })
  )

  it.live("a standalone connect interrupted while the server does not answer ends at once, its socket closed", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: flavor! })
      // Frozen: the TCP connect succeeds, the handshake gets no reply.
      yield* server.pause
      yield* Effect.addFinalizer(() => Effect.ignore(server.resume))
      const connecting = yield* Effect.forkChild(Effect.scoped(Standalone.connect({ url: server.url }, 60_000)))
      yield* Effect.sleep("300 millis")
      const started = Date.now()
      yield* Fiber.interrupt(connecting)
      assert.isBelow(Date.now() - started, 5_000, "not held until the 60 s connect limit")
      // A handshake the server never answers is destroyed after the attempt's grace (teardown.ts).
      yield* Effect.sleep(attemptGraceMillis)
      assert.strictEqual(yield* settledSocketsTo(server.port), 0)
    })
  )

  it.live("a pool closed while it opens a connection leaves no socket open", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: flavor! })
      const address = `127.0.0.1:${server.port}`
      const before = yield* serverConnections(server)
      const scope = yield* Scope.make()
      const pool = yield* Pool.make({ maxConnections: 2, dialer: nodeRedisDialer({}) }).pipe(Scope.provide(scope))
      // The first use starts connecting at once; the pool's scope closes before the socket connects.
      yield* Effect.forkDetach(
        pool.use(address, 2_000, (connection) => connection.send(["PING"], 1_000)),
        {
          startImmediately: true
        }
      )
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* settledSocketsTo(server.port), 0)
      assert.strictEqual(yield* serverConnections(server), before, "closed, not just unreferenced")
    })
  )
})

describe(`closing a cluster client on ${flavor}`, () => {
  // With `minimizeConnections` (as the lock's Cluster backend connects) node-redis opens a node's
  // connection on the first command for it; closing the client must not leave that attempt behind.
  it.live("a cluster client closed while it opens node connections leaves no socket open", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({ flavor: flavor!, replicasPerMaster: 0, nodeTimeoutMillis: 8_000 })
      const ports = topology.rootNodes.map(({ port }) => port)
      const options = { rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) }
      const connections = Effect.map(Effect.forEach(topology.nodes, serverConnections), (counts) =>
        counts.reduce((sum, count) => sum + count, 0)
      )
      for (const inFlight of ["commands", "sharded subscriptions"] as const) {
        const before = yield* connections
        const scope = yield* Scope.make()
        const cluster = yield* Cluster.connect(options, 5_000).pipe(Scope.provide(scope))
        // Keys and channels on every master: each master's connection starts opening in this tick.
        for (let i = 0; i < 30; i++) {
          const started =
            inFlight === "commands"
              ? cluster.sendCommand(`k${i}`, false, ["PTTL", `k${i}`], { timeout: 1_000 })
              : cluster.sSubscribe(`c${i}`, () => {})
          started.catch(() => {})
        }
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(yield* settledSocketsTo(...ports), 0, `closed with ${inFlight} in flight`)
        assert.strictEqual(yield* connections, before, `closed with ${inFlight} in flight, not just unreferenced`)
      }
    })
  )

  // A node connection's close() waits for the replies in flight, and a node that answers nothing
  // never sends them; the client's own destroy() after the bounded close reaches no node connection.
  it.live("a cluster client closed while a node answers nothing leaves no socket open", () =>
    Effect.gen(function* () {
      const topology = yield* ClusterTopology.start({
        flavor: flavor!,
        replicasPerMaster: 0,
        nodeTimeoutMillis: 30_000
      })
      const options = { rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) }
      const scope = yield* Scope.make()
      const cluster = yield* Cluster.connect(options, 5_000).pipe(Scope.provide(scope))
      const node = yield* topology.masterFor("k")
      // Its command connection and its sharded subscriber connection, both open and answering.
      yield* Effect.promise(() => cluster.sendCommand("k", false, ["PTTL", "k"], { timeout: 1_000 }))
      yield* Effect.promise(() => cluster.sSubscribe("k", () => {}))
      assert.isAtLeast(yield* settledSocketsTo(node.port), 2, "both connections open before the fault")
      yield* node.pause
      yield* Effect.addFinalizer(() => Effect.ignore(node.resume))
      cluster.sendCommand("k", false, ["PTTL", "k"], { timeout: 1_000 }).catch(() => {})
      cluster.sSubscribe("{k}:other", () => {}).catch(() => {})
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* settledSocketsTo(node.port), 0)
    })
  )
})
