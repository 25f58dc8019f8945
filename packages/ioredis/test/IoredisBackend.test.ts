// What the ioredis backend adds to the contract: its options, whose connections it closes (its own)
// and whose it leaves open (the application's), recovery from a killed connection and from one gone
// silent, how ioredis's failures are read, and that node-redis is never loaded.
import { assert, describe, it } from "@effect/vitest"
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"
import { fileURLToPath } from "node:url"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { Cluster, Redis } from "ioredis"
import { Lock, LockBackend, LockScripts } from "@sage/lock"
import { type InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { FaultProxy, RedisServer, ServerBinary } from "@sage/lock-testkit"
import { clientOver, wakeupsComeBackAfterStall } from "@sage/lock-testkit/contract/Handoff"
import * as IoredisBackend from "../src/IoredisBackend.ts"
import { classify } from "../src/internal/classify.ts"
import { ownedClient } from "./targets.ts"

const flavor = ServerBinary.flavorsUnderTest()[0]!

/** The clients connected to `server`, not counting the test kit's own command connection. */
const clientNames = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("CLIENT", "LIST"), (list) =>
    String(list)
      .split("\n")
      .filter((line) => line.includes("cmd=") && !line.includes("cmd=client|list"))
  )

/** A loopback port nothing listens on (bound, then closed). */
const closedPort = Effect.promise(
  () =>
    new Promise<number>((resolve) => {
      const server = Net.createServer()
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as Net.AddressInfo
        server.close(() => resolve(port))
      })
    })
)

const invalidField = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>): Effect.Effect<string, A> =>
  Effect.scoped(effect).pipe(
    Effect.flip,
    Effect.map((error) => {
      assert.strictEqual((error as { readonly _tag: string })._tag, "InvalidArgument")
      return (error as unknown as { readonly field: string }).field
    })
  )

const withLockOnce = (backend: Layer.Layer<LockBackend.LockBackend, InvalidArgument | LockRedisError>) =>
  Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.succeed("inside")).pipe(
    Effect.provide(Lock.layer({ namespace: "ioredis-test" }).pipe(Layer.provide(backend)))
  )

/** Open sockets of this process to `port` (`_getActiveHandles` is undocumented; nothing else names a peer). */
const socketsTo = (port: number): number =>
  (
    (process as unknown as { _getActiveHandles?: () => Array<{ remotePort?: number }> })._getActiveHandles?.() ?? []
  ).filter((handle) => handle.remotePort === port).length

describe("IoredisBackend", () => {
  it.effect("bad options and clients are InvalidArgument naming the field", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* invalidField(IoredisBackend.make({ connections: 0 })), "connections")
      assert.strictEqual(yield* invalidField(IoredisBackend.make({ connections: 2.5 })), "connections")
      assert.strictEqual(
        yield* invalidField(IoredisBackend.make({ wakeups: "yes" } as unknown as IoredisBackend.Options)),
        "wakeups"
      )
      assert.strictEqual(yield* invalidField(IoredisBackend.make({ connectTimeout: -1 })), "connectTimeout")
      // Through sentinels (IoredisSentinel.test.ts): a master name and one sentinel at least.
      assert.strictEqual(
        yield* invalidField(IoredisBackend.make({ sentinels: [{ host: "127.0.0.1", port: 1 }] })),
        "name"
      )
      assert.strictEqual(yield* invalidField(IoredisBackend.make({ sentinels: [], name: "m" })), "sentinels")
      assert.strictEqual(
        yield* invalidField(IoredisBackend.fromClient({} as unknown as IoredisBackend.SharedClient)),
        "client"
      )
      // A Cluster is taken (IoredisCluster.test.ts); one with its slot map missing is not.
      const cluster = new Cluster([{ host: "127.0.0.1", port: 1 }], { lazyConnect: true })
      assert.strictEqual(
        yield* invalidField(IoredisBackend.fromClient(Object.assign(cluster, { slots: undefined as never }))),
        "client"
      )
      assert.strictEqual(
        yield* invalidField(
          IoredisBackend.fromClient(new Cluster([{ host: "127.0.0.1", port: 1 }], { lazyConnect: true }), {
            wakeups: "no" as never
          })
        ),
        "wakeups"
      )
      const viaSentinels = new Redis({ sentinels: [{ host: "127.0.0.1", port: 0 }], name: "m", lazyConnect: true })
      assert.strictEqual(yield* invalidField(IoredisBackend.fromClient(viaSentinels)), "sentinels")
    })
  )

  it.live("a server that cannot be reached fails the layer with a retryable LockRedisError within connectTimeout", () =>
    Effect.gen(function* () {
      const port = yield* closedPort
      const started = performance.now()
      const error = yield* Effect.flip(
        Effect.scoped(IoredisBackend.make({ host: "127.0.0.1", port, connectTimeout: 500 }))
      )
      assert.strictEqual(error._tag, "LockRedisError")
      if (error._tag === "LockRedisError") assert.isTrue(error.retryable, error.code)
      assert.isBelow(performance.now() - started, 5_000)
    })
  )

  it.live("its own connections, and the subscriber, close with the layer", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const scope = yield* Scope.make()
      const backend = yield* Scope.provide(IoredisBackend.make({ host: "127.0.0.1", port: server.port }), scope)
      const layer = Layer.succeed(LockBackend.LockBackend, backend)
      // A waiter opens the subscriber: hold the lock in one fiber while another waits for it.
      const held = Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.sleep(300)).pipe(
        Effect.provide(Lock.layer({ namespace: "ioredis-close" }).pipe(Layer.provide(layer)))
      )
      const waited = Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void).pipe(
        Effect.delay(50),
        Effect.provide(Lock.layer({ namespace: "ioredis-close" }).pipe(Layer.provide(layer)))
      )
      yield* Effect.all([held, waited], { concurrency: "unbounded" })
      assert.strictEqual((yield* clientNames(server)).length, 3, "two connections and the subscriber")
      yield* Scope.close(scope, Exit.void)
      yield* Effect.sleep(200)
      assert.deepStrictEqual(yield* clientNames(server), [])
    })
  )

  it.live("closing while the server is stalled leaves no socket of the lock's open (nothing keeps the process)", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const scope = yield* Scope.make()
      const backend = yield* Scope.provide(IoredisBackend.make({ host: "127.0.0.1", port: server.port }), scope)
      const layer = Lock.layer({ namespace: "ioredis-stalled" }).pipe(
        Layer.provide(Layer.succeed(LockBackend.LockBackend, backend))
      )
      // Both connections and the subscriber open.
      const held = Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.sleep(300)).pipe(Effect.provide(layer))
      const waited = Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void).pipe(
        Effect.delay(50),
        Effect.provide(layer)
      )
      yield* Effect.all([held, waited], { concurrency: "unbounded" })
      assert.isAbove(socketsTo(server.port), 0)
      yield* server.pause
      yield* Effect.addFinalizer(() => Effect.ignore(server.resume))
      yield* Scope.close(scope, Exit.void)
      // A stalled server answers neither QUIT nor the FIN of a socket that is merely ended.
      const start = Date.now()
      while (socketsTo(server.port) > 0 && Date.now() - start < 3_000) yield* Effect.sleep(50)
      assert.strictEqual(socketsTo(server.port), 0, "every socket to the stalled server is closed")
    })
  )

  it.live("the application's client stays open after the layer closes; only the lock's subscriber goes", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const client = yield* ownedClient(server.url)
      yield* Effect.promise(() => client.ping())
      yield* Effect.scoped(
        Effect.gen(function* () {
          const backend = yield* IoredisBackend.fromClient(client)
          // Two lock clients (as two processes would be) over the backend: the waiter is woken through it.
          const lockLayer = Lock.layer({ namespace: "ioredis-shared" }).pipe(
            Layer.provide(Layer.succeed(LockBackend.LockBackend, backend))
          )
          const held = Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.sleep(300)).pipe(
            Effect.provide(lockLayer)
          )
          const waited = Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void).pipe(
            Effect.delay(50),
            Effect.provide(lockLayer)
          )
          yield* Effect.all([held, waited], { concurrency: "unbounded" })
          assert.strictEqual((yield* clientNames(server)).length, 2, "the application's client and the subscriber")
        })
      )
      yield* Effect.sleep(200)
      assert.strictEqual(client.status, "ready")
      assert.strictEqual(yield* Effect.promise(() => client.ping()), "PONG")
      assert.strictEqual((yield* clientNames(server)).length, 1, "the application's client alone")
    })
  )

  it.live("a subscription refused after a reconnect (an ACL change) leaves waiters polling and ends nothing", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      yield* server.command("ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all")
      const backend = yield* IoredisBackend.make({
        host: "127.0.0.1",
        port: server.port,
        username: "locker",
        password: "pw"
      })
      const lockLayer = Lock.layer({ namespace: "ioredis-acl" }).pipe(
        Layer.provide(Layer.succeed(LockBackend.LockBackend, backend))
      )
      // A holder in one client and a waiter in another: the waiter subscribes, then is woken.
      const round = Effect.all(
        [
          Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.sleep(200)).pipe(Effect.provide(lockLayer)),
          Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.void).pipe(
            Effect.delay(50),
            Effect.provide(lockLayer)
          )
        ],
        { concurrency: "unbounded" }
      )
      yield* round
      // The lock's subscriber is killed while SUBSCRIBE is refused: its resubscription fails.
      yield* server.command("ACL", "SETUSER", "locker", "-subscribe")
      yield* server.command("CLIENT", "KILL", "TYPE", "pubsub")
      yield* Effect.sleep(500)
      // A wait that needs a new subscription now fails with the refusal, as documented; nothing else.
      const refused = yield* Effect.exit(round)
      if (Exit.isFailure(refused)) {
        const error = Cause.squash(refused.cause)
        assert.instanceOf(error, LockRedisError)
        assert.strictEqual(error.code, "NOPERM")
      }
      yield* server.command("ACL", "SETUSER", "locker", "+subscribe")
      yield* round
    }).pipe(Effect.scoped)
  )

  it.live("a killed connection costs one call at most: ioredis reconnects and the lock goes on", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const backend = IoredisBackend.layer({ host: "127.0.0.1", port: server.port, connections: 1 })
      const results = yield* Effect.gen(function* () {
        const first = yield* Effect.exit(Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.succeed(1)))
        yield* server.command("CLIENT", "KILL", "TYPE", "normal")
        const second = yield* Effect.exit(Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.succeed(2)))
        const third = yield* Lock.withLock("k", { waitTimeout: "5 seconds" })(Effect.succeed(3))
        return [first, second, third] as const
      }).pipe(Effect.provide(Lock.layer({ namespace: "ioredis-kill" }).pipe(Layer.provide(backend))))
      assert.isTrue(Exit.isSuccess(results[0]))
      assert.strictEqual(results[2], 3)
    })
  )

  it.live("a wake-up subscriber that goes silent while reported ready is replaced, and wake-ups resume", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const proxy = yield* FaultProxy.make({ upstreamPort: server.port })
      const a = yield* Effect.flatMap(IoredisBackend.make({ host: "127.0.0.1", port: server.port }), clientOver)
      // The waiter's connections go through the proxy: one for commands, one for its subscriptions.
      // A 5 s lease keeps the 1 s backoff cap `handoff` counts on.
      const b = yield* Lock.make({ namespace: "wake", leaseDuration: "5 seconds" }).pipe(
        Effect.provideService(
          LockBackend.LockBackend,
          yield* IoredisBackend.make({ host: "127.0.0.1", port: proxy.port, connections: 1 })
        )
      )
      // Both connections (commands, subscriptions) then forward nothing; new ones pass.
      yield* wakeupsComeBackAfterStall(() => Effect.succeed(server), a, b, "k", [proxy], 30_000)
    })
  )

  it.live("a connection that goes silent while reported ready is replaced, and its locks work again", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const proxy = yield* FaultProxy.make({ upstreamPort: server.port })
      const namespace = `ioredis-silent-${Math.random().toString(36).slice(2, 8)}`
      const backend = yield* IoredisBackend.make({
        host: "127.0.0.1",
        port: proxy.port,
        connections: 1,
        wakeups: false
      })
      const lock = yield* Lock.make({ namespace, leaseDuration: "3 seconds" }).pipe(
        Effect.provideService(LockBackend.LockBackend, backend)
      )
      yield* lock.withLock("quiet", { waitTimeout: "2 seconds" })(Effect.void)
      // ioredis reconnects on its own after a drop: the connection that goes silent below is its
      // second, with another id at the server than the first, and that is the one to close there.
      yield* proxy.closeAll
      yield* lock.withLock("quiet", { waitTimeout: "5 seconds" })(Effect.void)
      // The open connection forwards nothing from now on (TCP stays up, as behind a middlebox that
      // lost its state); new connections pass. ioredis keeps reporting the old one ready.
      yield* proxy.stallOpen
      const start = Date.now()
      const value = yield* Effect.succeed("answered").pipe(lock.withLock("quiet", { waitTimeout: "25 seconds" }))
      assert.strictEqual(value, "answered")
      // Attempts time out after the usable lease (2.85 s); the probe gives the connection 5 s more.
      // Without the replacement every attempt would time out until the wait ran out (TimedOut).
      assert.isBelow(Date.now() - start, 20_000)
      assert.strictEqual(proxy.connectionCount, 2, "the silent connection and its replacement (the first was closed)")
      // The attempts the silent connection held would reach the server now, had it not been closed
      // there first: the first of them would take the free key again, for a holder long gone.
      yield* proxy.heal
      yield* Effect.sleep(500)
      assert.isNull(yield* server.command("GET", LockScripts.lockKey(namespace, "quiet")), "nothing stale ran")
    })
  )

  it.live("ioredis's failures: a refused command is the server's reply, a closed client is CLOSED", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      yield* server.command("ACL", "SETUSER", "locked-out", "on", ">secret", "~*", "+@all", "-evalsha", "-eval")
      const user = yield* ownedClient(server.url.replace("redis://", "redis://locked-out:secret@"))
      const refused = yield* Effect.flip(withLockOnce(IoredisBackend.layerFromClient(user)))
      assert.instanceOf(refused, LockRedisError)
      assert.strictEqual(refused.code, "NOPERM")
      assert.isFalse(refused.retryable)
      const closed = new Redis(server.url, { lazyConnect: true })
      yield* Effect.promise(() => closed.connect())
      yield* Effect.promise(() => closed.quit())
      const error = yield* Effect.promise(() =>
        closed.call("PING").then(
          () => undefined,
          (e: unknown) => e
        )
      )
      const failure = classify("PING", error)
      assert.strictEqual(failure.code, "CLOSED")
      assert.isFalse(failure.retryable)
      const gaveUp = classify("EVALSHA", Object.assign(new Error("x"), { name: "MaxRetriesPerRequestError" }))
      assert.strictEqual(gaveUp.code, "DISCONNECTED")
      assert.isTrue(gaveUp.retryable)
      assert.strictEqual(classify("EVALSHA", new Error("Command timed out")).code, "TIMEOUT")
    })
  )

  it("never loads node-redis", () => {
    // A child process whose module resolution refuses node-redis imports the package and builds a
    // layer value: any import of `redis` or `@redis/*` on the way fails it.
    const hooks = `export async function resolve(specifier, context, next) {
      if (specifier === "redis" || specifier.startsWith("@redis/")) throw new Error("node-redis was loaded: " + specifier)
      return next(specifier, context)
    }`
    const register = `import { register } from "node:module"; register("data:text/javascript,${encodeURIComponent(hooks)}")`
    const program = `const { IoredisBackend } = await import("@sage/lock-ioredis"); IoredisBackend.layer({ port: 1 }); console.log("ok")`
    const result = ChildProcess.spawnSync(
      process.execPath,
      [
        "--conditions=@sage/source",
        "--import",
        `data:text/javascript,${encodeURIComponent(register)}`,
        "--input-type=module",
        "-e",
        program
      ],
      { cwd: fileURLToPath(new URL("..", import.meta.url)), encoding: "utf8", timeout: 30_000 }
    )
    assert.strictEqual(result.stdout.trim(), "ok", result.stderr)
  })
})
