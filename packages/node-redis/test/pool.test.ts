// The dedicated pool on a real server: waiting for a connection is interruptible at any moment and
// never leaks a permit. Driven directly (a standalone server stands in for a replicated node: the
// pool and the write sequence only need ROLE = master), because the contract cannot fill a pool on
// demand.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { FaultProxy, RedisServer, ServerBinary } from "@sage/lock-testkit"
import { laneOf } from "../src/internal/connection/lane.ts"
import { nodeRedisDialer } from "../src/internal/pool/nodeRedisDialer.ts"
import * as Pool from "../src/internal/pool/pool.ts"
import { makeBackend } from "../src/internal/replicated/backend.ts"
import type { Topology } from "../src/internal/replicated/topology.ts"
import { noWakeups } from "./support.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

/** A topology of one master at `address` (a server, or a proxy in front of one). */
const oneNode = (address: string): Topology => ({
  description: `one node at ${address}`,
  route: () => Result.succeed({ address, replicas: 0 }),
  isMaster: () => true,
  refresh: () => Effect.void,
  ...noWakeups
})

const onOneNodeWith = (sharedLanes: number, maxConnections = 1, idleCloseMillis?: number) =>
  Effect.gen(function* () {
    const server = yield* RedisServer.start({ flavor: flavor! })
    const address = `127.0.0.1:${server.port}`
    const pool = yield* Pool.make({ maxConnections, dialer: nodeRedisDialer({}), sharedLanes, idleCloseMillis })
    /** Holds one connection (the only one, in a pool of one) until interrupted or the scope closes. */
    const hog = Effect.forkScoped(pool.use(address, 1_000, () => Effect.never))
    return { server, address, pool, backend: yield* makeBackend(oneNode(address), pool), hog }
  })

const onOneNode = onOneNodeWith(1)

const request = (key: string, acknowledge: boolean) => ({
  key,
  token: `token-${key}`,
  leaseMillis: 5_000,
  timeoutMillis: 1_000,
  acknowledge
})

describe(`dedicated pool and shared connections on ${flavor}`, () => {
  it.live("a caller waiting for a connection is interrupted at once, and the permit is not lost", () =>
    Effect.gen(function* () {
      const { address, pool, hog } = yield* onOneNode
      const hogging = yield* hog
      yield* Effect.sleep(100)
      const waiter = yield* Effect.forkChild(pool.use(address, 5_000, () => Effect.succeed("late")))
      yield* Effect.sleep(200)
      const start = Date.now()
      yield* Fiber.interrupt(waiter)
      assert.isBelow(Date.now() - start, 2_500, "interrupting a pool wait does not wait for its 5 s timeout")
      yield* Fiber.interrupt(hogging)
      const value = yield* pool.use(address, 1_000, (connection) => connection.send(["PING"], 1_000))
      assert.strictEqual(value, "PONG", "the permit came back after both fibers left")
    })
  )

  it.live("a body that finishes while its renewal waits for a connection returns without that wait", () =>
    Effect.gen(function* () {
      const { backend, hog } = yield* onOneNode
      const lock = yield* Lock.make({
        namespace: "pool",
        leaseDuration: "6 seconds",
        replicaAcknowledgement: false
      }).pipe(Effect.provideService(LockBackend, backend))
      let bodyEnded = 0
      // The renewal (due 2 s in) finds the pool full and would wait about 3 s for it.
      const body = Effect.gen(function* () {
        yield* hog
        yield* Effect.sleep(2_500)
        bodyEnded = Date.now()
        return "done"
      })
      const value = yield* body.pipe(lock.withLock("renewing", { waitTimeout: "1 second" }))
      const late = Date.now() - bodyEnded
      assert.strictEqual(value, "done")
      // The release runs on the node's shared connection, not the full pool.
      assert.isBelow(late, 1_800, "the interrupted renewal did not hold the result back")
    })
  )
  it.live("a release needs no pooled connection once the shared one is open, and a killed one is reopened", () =>
    Effect.gen(function* () {
      const { server, pool, backend, hog } = yield* onOneNode
      const release = (token: string) =>
        backend.release({ key: "shared:{k}", token, leaseMillis: 5_000, timeoutMillis: 1_000, acknowledge: false })
      // The first release takes the pooled connection and opens the shared one in the background.
      assert.isFalse(yield* release("t0"), "nothing held that key: released nothing, and answered")
      yield* Effect.sleep(200)
      assert.strictEqual(pool.openConnections(), 2, "the pooled connection and the shared one")
      yield* hog
      yield* Effect.sleep(100)
      // With the only pooled connection held, a release through the pool would end in POOL_EXHAUSTED.
      assert.isFalse(yield* release("t1"), "the shared connection answered")
      // Every connection but the one sending this command: the shared one and the held one.
      yield* server.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
      yield* Effect.sleep(200)
      // The next release finds it broken: it reopens it in the background and takes the pool, which
      // is held here, so that one release fails; the one after uses the new shared connection.
      const fallback = yield* Effect.flip(release("t2"))
      assert.strictEqual(fallback.code, "POOL_EXHAUSTED")
      yield* Effect.sleep(200)
      assert.isFalse(yield* release("t3"), "a new shared connection took over")
    })
  )

  it.live("a pooled connection dropped between two commands fails the next one retryably, not as CLOSED", () =>
    Effect.gen(function* () {
      const { server, address, pool } = yield* onOneNode
      // A write sequence holds its connection across commands (script, ROLE, WAIT); a failover can
      // drop the socket between two of them, and pooled connections never reconnect.
      const [id, next] = yield* pool.use(address, 1_000, (connection) =>
        Effect.gen(function* () {
          const id = yield* connection.send(["CLIENT", "ID"], 1_000)
          yield* Effect.orDie(server.command("CLIENT", "KILL", "ID", String(id)))
          yield* Effect.sleep(200)
          const one = yield* Effect.orDie(Effect.flip(connection.send(["PING"], 1_000)))
          const all = yield* connection.sendAll([["ROLE"], ["PING"]], 1_000)
          return [id, { one, all }] as const
        })
      )
      assert.isNumber(id)
      assert.strictEqual(next.one.code, "DISCONNECTED")
      assert.isTrue(next.one.retryable)
      assert.isFalse(next.one.mayHaveExecuted, "never sent")
      for (const outcome of next.all) {
        assert.isTrue(Result.isFailure(outcome) && outcome.failure.code === "DISCONNECTED" && outcome.failure.retryable)
      }
      // The pool itself works on: the next use opens another connection.
      assert.strictEqual(yield* pool.use(address, 1_000, (connection) => connection.send(["PING"], 1_000)), "PONG")
    })
  )

  it.live("a shared connection that goes silent while ready is closed, and the next one takes over", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: flavor! })
      const proxy = yield* FaultProxy.make({ upstreamPort: server.port })
      const address = `127.0.0.1:${proxy.port}`
      const pool = yield* Pool.make({ maxConnections: 2, dialer: nodeRedisDialer({}) })
      const backend = yield* makeBackend(oneNode(address), pool)
      const release = (token: string) =>
        backend.release({ key: "quiet:{k}", token, leaseMillis: 5_000, timeoutMillis: 1_000, acknowledge: false })
      // Opens the shared connection in the background (this first release takes a pooled one).
      assert.isFalse(yield* release("t0"))
      yield* Effect.sleep(200)
      // Every connection open now forwards nothing (TCP stays up); new ones pass.
      yield* proxy.stallOpen
      const silent = yield* Effect.flip(release("t1"))
      assert.strictEqual(silent.code, "TIMEOUT", "the shared connection answers nothing")
      // That timeout made the connection be asked a PING, unanswered for 5 s: it is closed then.
      yield* Effect.sleep(6_000)
      // The next release finds it closed and opens a new one in the background (meanwhile releases
      // take a pooled connection, and the stalled idle one times out): one answers within a few tries.
      let answered = false
      for (let attempt = 0; attempt < 6 && !answered; attempt++) {
        answered = Result.isSuccess(yield* Effect.result(release(`t${attempt + 2}`)))
        if (!answered) yield* Effect.sleep(300)
      }
      assert.isTrue(answered, "a new shared connection answered")
    })
  )

  it.live("without acknowledgement an acquisition runs on the shared connection; with it, on the pool", () =>
    Effect.gen(function* () {
      const { server, pool, backend, hog } = yield* onOneNode
      // Opens the shared connection in the background (this first one takes the pooled connection).
      assert.isFalse(yield* backend.release(request("warm:{k}", false)))
      yield* Effect.sleep(200)
      yield* hog
      yield* Effect.sleep(100)
      // The only pooled connection is held: an acquisition still taking the pool would time out.
      const unacknowledged = yield* backend.acquire(request("off:{k}", false))
      assert.strictEqual(unacknowledged._tag, "Acquired", "ROLE checked on the shared connection")
      assert.strictEqual(yield* server.command("GET", "off:{k}"), "token-off:{k}")
      // WAIT counts only the writes of its own connection, so an acknowledged acquisition waits for
      // the pool (and here finds it held).
      const acknowledged = yield* Effect.flip(backend.acquire(request("on:{k}", true)))
      assert.strictEqual(acknowledged.code, "POOL_EXHAUSTED")
      assert.isNull(yield* server.command("GET", "on:{k}"), "it never reached the server")
      assert.strictEqual(pool.openConnections(), 2, "no connection was opened for either")
    })
  )

  it.live(
    "two shared connections per node open together, serve every lock between them, and both reopen after a kill",
    () =>
      Effect.gen(function* () {
        const { server, pool, backend, hog } = yield* onOneNodeWith(2)
        // One key for each shared connection (the key's hash picks it).
        const byLane = new Map<number, string>()
        for (let i = 0; byLane.size < 2; i++) byLane.set(laneOf(`lane:{${i}}`, 2), `lane:{${i}}`)
        const keys = [...byLane.values()]
        // The first operation takes the pooled connection and opens both shared ones in the background.
        assert.isFalse(yield* backend.release(request(keys[0]!, false)))
        yield* Effect.sleep(200)
        assert.strictEqual(pool.openConnections(), 3, "the pooled connection and both shared ones")
        yield* hog
        yield* Effect.sleep(100)
        // The only pooled connection is held: every lock below is served by its shared connection.
        const cycle = (key: string) =>
          Effect.gen(function* () {
            const acquired = yield* backend.acquire(request(key, false))
            assert.strictEqual(acquired._tag, "Acquired", key)
            assert.isTrue(yield* backend.release(request(key, false)), key)
          })
        yield* Effect.forEach([...keys, ...Array.from({ length: 20 }, (_, i) => `many:{${i}}`)], cycle, {
          concurrency: 8,
          discard: true
        })
        assert.strictEqual(pool.openConnections(), 3, "no connection per key")
        // Both shared connections (and the held one) are killed; the next operation finds its own
        // broken, reopens both in the background and falls back to the held pool.
        yield* server.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        yield* Effect.sleep(200)
        const fallback = yield* Effect.flip(backend.acquire(request(keys[0]!, false)))
        assert.strictEqual(fallback.code, "POOL_EXHAUSTED")
        yield* Effect.sleep(200)
        yield* Effect.forEach(keys, cycle, { discard: true })
      })
  )

  it.live("a burst of first operations opens each shared connection once", () =>
    Effect.gen(function* () {
      const { server, pool, backend } = yield* onOneNodeWith(2, 16)
      // Connections the server accepted since `before`, not counting the ones the test kit opens
      // for its own commands (one per command).
      const received = Effect.map(server.command("INFO", "stats"), (info) =>
        Number(/total_connections_received:(\d+)/.exec(String(info))?.[1])
      )
      const before = yield* received
      let probes = 0
      const opened = Effect.map(received, (total) => total - before - ++probes)
      // 16 releases at once on a backend that has no shared connection yet: each falls back to a
      // pooled connection while the two shared ones open, and none opens them again.
      yield* Effect.forEach(
        Array.from({ length: 16 }, (_, i) => `burst:{${i}}`),
        (key) => backend.release(request(key, false)),
        { concurrency: "unbounded", discard: true }
      )
      yield* Effect.sleep(300)
      const pooled = pool.openConnections() - 2
      assert.isAtMost(pooled, 16)
      assert.strictEqual(yield* opened, pooled + 2, "every connection opened is still open")
      // Once they are open, the same burst opens nothing.
      yield* Effect.forEach(
        Array.from({ length: 16 }, (_, i) => `burst:{${i}}`),
        (key) => backend.release(request(key, false)),
        { concurrency: "unbounded", discard: true }
      )
      assert.strictEqual(yield* opened, pooled + 2)
    })
  )

  it.live("connections unused for the idle period are closed, pooled and shared alike; ones in use stay", () =>
    Effect.gen(function* () {
      const idleCloseMillis = 1_000
      const { server, address, pool, backend } = yield* onOneNodeWith(2, 2, idleCloseMillis)
      // Every connection the server has, the test kit's own (one per command) included.
      const stats = Effect.map(server.command("INFO", "clients", "stats"), (info) => ({
        connected: Number(/connected_clients:(\d+)/.exec(String(info))?.[1]),
        received: Number(/total_connections_received:(\d+)/.exec(String(info))?.[1])
      }))
      const before = yield* stats
      const byLane = new Map<number, string>()
      for (let i = 0; byLane.size < 2; i++) byLane.set(laneOf(`idle:{${i}}`, 2), `idle:{${i}}`)
      const busyKey = byLane.get(0)!
      // Two pooled connections (a burst of two) and both shared ones.
      yield* Effect.all([pool.use(address, 1_000, () => Effect.sleep(50)), backend.release(request(busyKey, false))], {
        concurrency: "unbounded"
      })
      yield* Effect.sleep(200)
      assert.strictEqual(pool.openConnections(), 4, "two pooled connections and two shared ones")
      // One shared connection and one pooled one stay in use for three idle periods: only the other
      // two are closed, and nothing is reopened.
      const opened = (yield* stats).received
      const deadline = Date.now() + 3 * idleCloseMillis
      while (Date.now() < deadline) {
        assert.isFalse(yield* backend.release(request(busyKey, false)))
        yield* pool.use(address, 1_000, (connection) => connection.send(["PING"], 1_000))
        yield* Effect.sleep(50)
      }
      assert.strictEqual(pool.openConnections(), 2, "the shared and the pooled connection in use")
      const during = yield* stats
      assert.strictEqual(during.received - opened, 1, "nothing reopened: only the test kit's own connection for INFO")
      assert.strictEqual(during.connected, before.connected + 2, "the server sees the same two")
      // Unused from here on: all are closed, and the next operation opens what it needs again.
      yield* Effect.sleep(3 * idleCloseMillis)
      assert.strictEqual(pool.openConnections(), 0)
      assert.strictEqual((yield* stats).connected, before.connected, "the server has none of the lock's left")
      assert.isFalse(yield* backend.release(request(busyKey, false)))
      yield* Effect.sleep(200)
      assert.strictEqual(pool.openConnections(), 3, "a pooled connection and the two shared ones, again")
    })
  )

  it.live("batched renewals survive SCRIPT FLUSH: the NOSCRIPT ones are sent again as EVAL", () =>
    Effect.gen(function* () {
      const { server, backend } = yield* onOneNode
      const lock = yield* Lock.make({
        namespace: "flush",
        leaseDuration: "1500 millis",
        replicaAcknowledgement: false
      }).pipe(Effect.provideService(LockBackend, backend))
      const body = Effect.gen(function* () {
        yield* Effect.sleep(200)
        yield* server.command("SCRIPT", "FLUSH")
        yield* server.command("CONFIG", "RESETSTAT")
        // Two renewals of both locks (every 500 ms) fall in this time.
        yield* Effect.sleep(1_300)
        return "kept"
      })
      const values = yield* Effect.all(
        ["a", "b"].map((key) => body.pipe(lock.withLock(key, { waitTimeout: "1 second" }))),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(values, ["kept", "kept"])
      const stats = String(yield* server.command("INFO", "commandstats"))
      assert.match(stats, /cmdstat_eval:calls=[1-9]/, "a renewal re-sent the script's source")
    })
  )

  it.live("sendAll answers every command's outcome in order, and cuts off the one without a reply", () =>
    Effect.gen(function* () {
      const { address, pool } = yield* onOneNode
      const outcomes = yield* pool.use(address, 2_000, (connection) =>
        connection.sendAll(
          [["PING"], ["NOSUCHCOMMAND"], ["ECHO", "after the error"], ["BLPOP", "sendAll:nothing", "2"]],
          300
        )
      )
      assert.strictEqual(outcomes.length, 4)
      const [ping, unknown, echo, blocked] = outcomes
      assert.deepStrictEqual(ping, Result.succeed("PONG"))
      assert.isTrue(unknown !== undefined && Result.isFailure(unknown) && unknown.failure.kind === "server")
      assert.deepStrictEqual(echo, Result.succeed("after the error"), "an error reply does not stop the others")
      assert.isTrue(
        blocked !== undefined && Result.isFailure(blocked) && blocked.failure.code === "TIMEOUT",
        "a command still waiting when the time is up fails as TIMEOUT"
      )
      // The BLPOP still occupies that connection: it is closed, not handed to the next caller, whose
      // commands would queue behind it.
      assert.strictEqual(pool.openConnections(), 0, "the connection with a command in flight was closed")
      const next = yield* pool.use(address, 2_000, (connection) => connection.send(["PING"], 300))
      assert.strictEqual(next, "PONG", "the next caller is answered at once, on a new connection")
    })
  )
})
