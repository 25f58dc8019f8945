// Cleanup after a write that landed on a node that was not the master: the release must reach that
// node, not only the current master. Two real servers play the old and the new master; the view
// changes between routing the write and checking it, as when a failover is noticed mid-operation
// (a real failover cannot be timed to land in that window).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import { nodeRedisDialer } from "../src/internal/pool/nodeRedisDialer.ts"
import * as Pool from "../src/internal/pool/pool.ts"
import { makeBackend } from "../src/internal/replicated/backend.ts"
import type { Topology } from "../src/internal/replicated/topology.ts"
import { noWakeups } from "./support.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

/**
 * Two real servers playing the old and the new master, and a backend over a view that `routing`
 * describes from their addresses.
 */
const overTwoNodes = (
  routing: (oldAddress: string, currentAddress: string) => Pick<Topology, "description" | "route" | "isMaster">
) =>
  Effect.gen(function* () {
    const old = yield* RedisServer.start({ flavor: flavor! })
    const current = yield* RedisServer.start({ flavor: flavor! })
    const currentAddress = `127.0.0.1:${current.port}`
    const topology: Topology = {
      ...routing(`127.0.0.1:${old.port}`, currentAddress),
      refresh: () => Effect.void,
      ...noWakeups
    }
    const pool = yield* Pool.make({ maxConnections: 2, dialer: nodeRedisDialer({}) })
    return { old, current, currentAddress, backend: yield* makeBackend(topology, pool) }
  })

describe(`a write outside the view on ${flavor}`, () => {
  it.live("acquisition on a node that turned out not to be the master is released on that node", () =>
    Effect.gen(function* () {
      let routed = 0
      const { old, current, backend } = yield* overTwoNodes((oldAddress, currentAddress) => ({
        description: "view changing mid-operation",
        // The first operation is routed by the stale view; every later one by the new view.
        route: () => Result.succeed({ address: routed++ === 0 ? oldAddress : currentAddress, replicas: 0 }),
        isMaster: (_key, address) => address === currentAddress
      }))
      const lock = yield* Lock.make({ namespace: "stray", replicaAcknowledgement: false }).pipe(
        Effect.provideService(LockBackend, backend)
      )
      const error = yield* Effect.void.pipe(lock.withLock("k", { waitTimeout: "2 seconds" }), Effect.flip)
      assert.strictEqual(error._tag, "LockLost")
      if (error._tag === "LockLost") assert.strictEqual(error.reason, "not-master")
      assert.isNull(yield* old.command("GET", "stray:{k}"), "the node that took the write no longer holds it")
      assert.isNull(yield* current.command("GET", "stray:{k}"))
    })
  )

  it.live("a batched renewal on a node that turned out not to be the master is released on that node", () =>
    Effect.gen(function* () {
      // Where operations are routed, and which node the view calls master when a write is checked.
      const view = { routeTo: "", master: "" }
      const { old, currentAddress, backend } = yield* overTwoNodes((oldAddress) => {
        view.routeTo = oldAddress
        view.master = oldAddress
        return {
          description: "view changing mid-renewal",
          route: () => Result.succeed({ address: view.routeTo, replicas: 0 }),
          isMaster: (_key, address) => address === view.master
        }
      })
      const lease = { key: "stray:{r}", token: "t", leaseMillis: 10_000, timeoutMillis: 1_000, acknowledge: false }
      assert.strictEqual((yield* backend.acquire(lease))._tag, "Acquired")
      // The renewal is routed by the stale view; by the time its ROLE is checked, the view moved on.
      view.master = currentAddress
      const [renewed] = yield* backend.renewAll!([lease])
      assert.isTrue(typeof renewed !== "boolean" && renewed.code === "NOT_MASTER", `renewed: ${String(renewed)}`)
      view.routeTo = currentAddress
      yield* backend.release(lease)
      assert.isNull(yield* old.command("GET", "stray:{r}"), "the node the renewal extended no longer holds it")
    })
  )
})
