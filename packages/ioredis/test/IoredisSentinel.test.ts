// The Sentinel backend over ioredis, beyond the contract: wake-ups before and after a failover, a
// held lock across a failover, the sentinels' own credentials, what closes with the layer, and a
// name no sentinel monitors or sentinels that never answer.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Redis } from "ioredis"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { Faults, type RedisServer, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import { heldAcrossFailover } from "@sage/lock-testkit/contract/HeldAcrossFailover"
import { clientOver, handoff, median, show, wokenWithinMillis } from "@sage/lock-testkit/contract/Handoff"
import * as IoredisBackend from "../src/IoredisBackend.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

/** A lock client over `backend`, as one process would have. */
const clientOn = (backend: LockBackend["Service"], options: Lock.LockOptions = {}) =>
  Lock.make({ namespace: "ios", ...options }).pipe(Effect.provideService(LockBackend, backend))

/** `connected_clients` from `INFO clients` (the test kit's own connection included). */
const connectedClients = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("INFO", "clients"), (info) => Number(/connected_clients:(\d+)/.exec(String(info))?.[1]))

const backendOn = (topology: SentinelTopology.SentinelTopology, options: IoredisBackend.Options = {}) =>
  IoredisBackend.make({ sentinels: topology.sentinelNodes, name: topology.masterName, ...options })

/** Handoffs between two clients on `key`, alternating who holds: their median and all of them. */
const handoffs = (
  topology: SentinelTopology.SentinelTopology,
  a: Lock.LockClient<string>,
  b: Lock.LockClient<string>,
  count: number
) =>
  Effect.gen(function* () {
    const gaps: Array<number> = []
    for (let i = 0; i < count; i++)
      gaps.push(yield* handoff(() => topology.master(), i % 2 ? a : b, i % 2 ? b : a, "s"))
    return { median: median(gaps), all: show(gaps) }
  })

describe(`ioredis sentinel on ${flavor}`, () => {
  it.live(
    "a release wakes a waiter of another process, before and after a failover",
    () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor: flavor! })
        const a = yield* Effect.flatMap(backendOn(topology), clientOver)
        const b = yield* Effect.flatMap(backendOn(topology), clientOver)
        const before = yield* handoffs(topology, a, b, 3)
        assert.isBelow(before.median, wokenWithinMillis, `before the failover: ${before.all}`)
        yield* SentinelTopology.failover(topology)
        // Let both clients see the new master (their first calls may still go to the old one).
        yield* handoffs(topology, a, b, 1).pipe(Effect.ignore)
        const after = yield* handoffs(topology, a, b, 3)
        assert.isBelow(after.median, wokenWithinMillis, `after the failover: ${after.all}`)
      }),
    120_000
  )

  it.live(
    "a held lock survives a failover: the view moves, and renewal follows it to the promoted master",
    () =>
      Effect.gen(function* () {
        const topology = yield* SentinelTopology.start({ flavor: flavor! })
        // Built from the options of an application's client, as `fromClient` does.
        const owned = new Redis({ sentinels: topology.sentinelNodes, name: topology.masterName, lazyConnect: true })
        const backend = yield* IoredisBackend.fromClient(owned)
        // The lease must outlast the failover (renewals fail while the master switches): 8 s.
        const lock = yield* clientOn(backend, { leaseDuration: "8 seconds" })
        yield* heldAcrossFailover(
          lock,
          "survivor",
          () => topology.master(),
          () => SentinelTopology.failover(topology)
        )
        assert.strictEqual(owned.status, "wait", "the application's client was never connected by the lock")
      }),
    120_000
  )

  it.live("sentinels that require a password are asked with sentinelPassword, the master with password", () =>
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor: flavor!, downAfterMillis: 8_000 })
      // Asked of the sentinels before they want a password.
      const master = yield* topology.master()
      // The sentinels' default user gets a password (the test kit's open connections stay logged in).
      yield* Effect.forEach(topology.sentinels, (sentinel) =>
        sentinel.command("ACL", "SETUSER", "default", "resetpass", ">s-pw")
      )
      yield* Effect.forEach(topology.nodes, (node) =>
        node.command("ACL", "SETUSER", "locker", "on", ">m-pw", "~*", "&*", "+@all")
      )
      const refused = yield* Effect.scoped(backendOn(topology, { connectTimeout: 1_500 })).pipe(Effect.flip)
      assert.strictEqual(refused._tag, "LockRedisError", "no view without the sentinels' password")
      const backend = yield* backendOn(topology, { sentinelPassword: "s-pw", username: "locker", password: "m-pw" })
      const lock = yield* clientOn(backend)
      assert.strictEqual(yield* Effect.succeed("in").pipe(lock.withLock("k", { waitTimeout: "2 seconds" })), "in")
      const clients = String(yield* master.command("CLIENT", "LIST"))
      assert.include(clients, "user=locker", "the lock's connections to the master log in as the master's user")
    })
  )

  it.live("everything the lock opened closes with the layer", () =>
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor: flavor!, downAfterMillis: 8_000 })
      const peers = [...topology.nodes, ...topology.sentinels]
      const before = yield* Effect.forEach(peers, connectedClients)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const backend = yield* backendOn(topology)
          const [a, b] = yield* Effect.all([clientOn(backend), clientOn(backend)])
          yield* Effect.all(
            [
              a.withLock("c", { waitTimeout: "5 seconds" })(Effect.sleep("50 millis")),
              b.withLock("c", { waitTimeout: "5 seconds" })(Effect.void)
            ],
            { concurrency: "unbounded" }
          )
        })
      )
      const start = Date.now()
      let after = yield* Effect.forEach(peers, connectedClients)
      while (after.some((count, i) => count > before[i]!) && Date.now() - start < 5_000) {
        yield* Effect.sleep(50)
        after = yield* Effect.forEach(peers, connectedClients)
      }
      assert.deepStrictEqual(after, before, "every connection to the servers and sentinels is closed")
    })
  )

  it.live("a name no sentinel monitors is InvalidArgument at once; sentinels that never answer fail in time", () =>
    Effect.gen(function* () {
      const topology = yield* SentinelTopology.start({ flavor: flavor!, downAfterMillis: 8_000 })
      const start = Date.now()
      const unknown = yield* Effect.scoped(
        IoredisBackend.make({ sentinels: topology.sentinelNodes, name: "not-monitored", connectTimeout: 5_000 })
      ).pipe(Effect.flip, Effect.timeout("10 seconds"))
      assert.isBelow(Date.now() - start, 2_000)
      assert.strictEqual(unknown._tag, "InvalidArgument")
      if (unknown._tag === "InvalidArgument") assert.strictEqual(unknown.field, "name")
      const port = yield* Faults.silentPeer
      const silentStart = Date.now()
      const silent = yield* Effect.scoped(
        IoredisBackend.make({ sentinels: [{ host: "127.0.0.1", port }], name: "m", connectTimeout: 500 })
      ).pipe(Effect.flip, Effect.timeout("10 seconds"))
      assert.isBelow(Date.now() - silentStart, 2_000)
      assert.strictEqual(silent._tag, "LockRedisError")
    })
  )
})
