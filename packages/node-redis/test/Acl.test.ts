// The least-privilege ACL lines of docs/topologies.md, proven enough and proven tight on real servers:
// for each mode the test creates the documented user (`Acl.rules`) on every data node, runs a full
// lock cycle as that user (two clients contending, so waiters register, get woken through pub/sub
// and give up; bodies long enough to be renewed), and checks that the servers' ACL LOG recorded no
// denial. The same line minus one command the mode needs must fail, so the check can fail.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import { Lock } from "@sage/lock"
import type { LockBackend } from "@sage/lock/LockBackend"
import { Acl, ClusterTopology, RedisServer, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

const user = "locker"
const password = "acl-test-secret"
const namespace = "acl"
const credentials = { username: user, password }

type BackendLayer = Layer.Layer<LockBackend, unknown>

/**
 * Two clients (each its own backend and connections) contend on one key: bodies outlive a renewal
 * period, one caller gives up early (the leave script), and every other call must succeed.
 */
/** A client over its own backend, which lives in the caller's scope (built, not provided: provide would close it). */
const clientOf = (backend: () => BackendLayer, replicaAcknowledgement: boolean) =>
  Effect.flatMap(Layer.build(backend()), (context) =>
    // Renewed every 333 ms, so the 450 ms bodies need a renewal; 1 s rides out a stall under load.
    Lock.make({ namespace, leaseDuration: "1 second", replicaAcknowledgement }).pipe(Effect.provide(context))
  )

const cycle = (backend: () => BackendLayer, replicaAcknowledgement: boolean) =>
  Effect.gen(function* () {
    const [a, b] = yield* Effect.all([
      clientOf(backend, replicaAcknowledgement),
      clientOf(backend, replicaAcknowledgement)
    ])
    const body = Effect.sleep("450 millis")
    const calls = [a, b, a, b].map((lock) => lock.withLock("k", { waitTimeout: "10 seconds" })(body))
    const impatient = b.withLock("k", { waitTimeout: "100 millis" })(body).pipe(Effect.flip)
    const [outcomes, gaveUp] = yield* Effect.all([Effect.all(calls, { concurrency: "unbounded" }), impatient], {
      concurrency: "unbounded"
    })
    assert.strictEqual(outcomes.length, 4)
    assert.strictEqual(gaveUp._tag, "TimedOut")
  }).pipe(Effect.scoped)

/** Runs the cycle as the documented user of `mode`, then as a user lacking `missing`. */
const proveMode = (
  mode: Acl.Mode,
  nodes: ReadonlyArray<RedisServer.RedisServer>,
  backend: () => BackendLayer,
  missing: string
) =>
  Effect.gen(function* () {
    const acknowledged = mode === "replicated" || mode === "cluster"
    yield* Acl.createUser(nodes, mode, { user, password, namespace })
    yield* Acl.resetLogs(nodes)
    const exit = yield* Effect.exit(cycle(backend, acknowledged))
    assert.isTrue(Exit.isSuccess(exit), `${mode}: the documented ACL is not enough: ${String(exit)}`)
    assert.deepStrictEqual(yield* Acl.denialsExceptClientSetinfo(nodes), [], `${mode}: the servers denied commands`)

    assert.include(Acl.commands(mode), missing)
    yield* Effect.forEach(nodes, (node) => node.command("ACL", "SETUSER", user, `-${missing}`), { discard: true })
    yield* Acl.resetLogs(nodes)
    const without = yield* Effect.exit(cycle(backend, acknowledged))
    assert.isTrue(Exit.isFailure(without), `${mode}: the cycle passed without ${missing}, so the check proves nothing`)
    const denied = yield* Acl.denialsExceptClientSetinfo(nodes)
    assert.isTrue(
      denied.some((entry) => entry.endsWith(`:${missing}`)),
      `${mode}: expected a denial of ${missing}, got ${denied.join(", ")}`
    )
  })

const topologies = new URL("../../../docs/topologies.md", import.meta.url)

describe("least-privilege ACL lines", () => {
  it("docs/topologies.md states every mode's line exactly as tested", () => {
    const docs = Fs.readFileSync(topologies, "utf8")
    for (const mode of Acl.modes) assert.include(docs, Acl.line(mode, "<namespace>"), `line for ${mode}`)
  })

  for (const flavor of ServerBinary.flavorsUnderTest()) {
    it.live(
      `${flavor} standalone: the line is enough, and without ZADD (waiter registration) it is not`,
      () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          yield* proveMode(
            "standalone",
            [server],
            () => NodeRedisBackend.layer({ url: server.url, ...credentials }),
            "zadd"
          )
        }),
      60_000
    )

    it.live(
      `${flavor} Sentinel (data nodes): with and without acknowledgement; WAIT and ROLE are each needed`,
      () =>
        Effect.gen(function* () {
          const topology = yield* SentinelTopology.start({ flavor })
          const backend = () =>
            NodeRedisBackend.layerSentinel({
              name: topology.masterName,
              sentinels: topology.sentinelNodes,
              nodeClientOptions: credentials
            })
          yield* proveMode("replicated", topology.nodes, backend, "wait")
          yield* proveMode("replicated-no-ack", topology.nodes, backend, "role")
        }),
      90_000
    )

    it.live(
      `${flavor} Cluster: with and without acknowledgement; WAIT and CLUSTER SLOTS are each needed`,
      () =>
        Effect.gen(function* () {
          const cluster = yield* ClusterTopology.start({ flavor })
          const backend = () =>
            NodeRedisBackend.layerCluster({ rootNodes: [{ url: cluster.nodes[0]?.url ?? "" }], defaults: credentials })
          yield* proveMode("cluster", cluster.nodes, backend, "wait")
          yield* proveMode("cluster-no-ack", cluster.nodes, backend, "cluster|slots")
        }),
      90_000
    )
  }
})
