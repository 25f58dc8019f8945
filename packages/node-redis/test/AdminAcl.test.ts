// The LockAdmin ACL lines of docs/admin.md, proven enough and proven tight on real servers: a lock is
// held (and waited for) by the lock's own clients; an operator connected as the documented read-only
// user inspects and lists it with no denial in ACL LOG and cannot force it free; the user with the
// release line can. The read line minus ZCOUNT (the read script) or SCAN (list) must fail, so the
// check can fail. The Cluster lines also grant CLUSTER SLOTS, which Acl.test.ts proves a node-redis
// Cluster client needs to connect.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { Lock, LockScripts } from "@sage/lock"
import type { LockBackend } from "@sage/lock/LockBackend"
import { Acl, ClusterTopology, RedisServer, SentinelTopology, ServerBinary } from "@sage/lock-testkit"
import * as LockAdmin from "../src/LockAdmin.ts"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { connectClient, connectCluster, connectSentinel, type Credentials } from "./clients.ts"

const namespace = "ops"
const user = "lockadmin"
const credentials: Credentials = { username: user, password: "admin-acl-secret" }
const key = LockScripts.lockKey(namespace, "job")

/** Holds `job` with one client of the default user and makes a second one wait for it, until the scope ends. */
const holdWithWaiter = (backend: Layer.Layer<LockBackend, unknown>) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(backend)
    const make = Lock.make({ namespace, leaseDuration: "5 seconds" }).pipe(Effect.provide(context))
    const [holder, waiter] = yield* Effect.all([make, make])
    yield* holder.withLock("job", { waitTimeout: "5 seconds" })(Effect.never).pipe(Effect.ignore, Effect.forkScoped)
    yield* Effect.sleep("300 millis")
    yield* waiter.withLock("job", { waitTimeout: "60 seconds" })(Effect.never).pipe(Effect.ignore, Effect.forkScoped)
  })

/** Creates the user with `rules` on every node and connects a fresh client as that user. */
const connectAs = (
  nodes: ReadonlyArray<RedisServer.RedisServer>,
  rules: ReadonlyArray<string>,
  connect: (credentials: Credentials) => Effect.Effect<LockAdmin.Client, never, Scope.Scope>
) =>
  Effect.gen(function* () {
    yield* Acl.createUserWithRules(nodes, user, rules)
    yield* Acl.resetLogs(nodes)
    return yield* connect(credentials)
  })

const deniedOnly = (nodes: ReadonlyArray<RedisServer.RedisServer>, command: string) =>
  Effect.gen(function* () {
    const denied = yield* Acl.denialsExceptClientSetinfo(nodes)
    assert.isNotEmpty(denied, `expected a denial of ${command}`)
    for (const entry of denied) assert.isTrue(entry.endsWith(`:${command}`), `unexpected denial ${entry}`)
  })

const proveAdmin = (
  deployment: Acl.AdminDeployment,
  nodes: ReadonlyArray<RedisServer.RedisServer>,
  connect: (credentials: Credentials) => Effect.Effect<LockAdmin.Client, never, Scope.Scope>
) =>
  Effect.gen(function* () {
    const reader = yield* connectAs(nodes, Acl.adminRules("read", deployment, namespace, credentials.password), connect)
    // The waiter registers within its first attempt; poll the count rather than guess the moment.
    let info = yield* LockAdmin.inspect(reader, key)
    for (let i = 0; i < 50 && info.waiters < 1; i++) {
      yield* Effect.sleep("100 millis")
      info = yield* LockAdmin.inspect(reader, key)
    }
    assert.isTrue(info.held, "the lock is held")
    assert.strictEqual(info.waiters, 1, "the other client waits")
    assert.isDefined(info.lastFencingToken)
    assert.deepStrictEqual(
      (yield* LockAdmin.list(reader, namespace)).map((one) => [one.key, one.held]),
      [[key, true]]
    )
    assert.deepStrictEqual(
      yield* Acl.denialsExceptClientSetinfo(nodes),
      [],
      `${deployment}: the read line was refused something`
    )

    const refused = yield* LockAdmin.forceRelease(reader, key, { force: true }).pipe(Effect.flip)
    assert.strictEqual(refused._tag, "LockRedisError", "the read-only user cannot force a lock free")
    assert.isTrue((yield* LockAdmin.inspect(reader, key)).held, "the refused release changed nothing")

    for (const [missing, run] of [
      ["zcount", (client: LockAdmin.Client) => Effect.asVoid(LockAdmin.inspect(client, key))],
      ["scan", (client: LockAdmin.Client) => Effect.asVoid(LockAdmin.list(client, namespace))]
    ] as const) {
      const rules = Acl.adminRules("read", deployment, namespace, credentials.password).filter(
        (rule) => rule !== `+${missing}`
      )
      const client = yield* connectAs(nodes, rules, connect)
      const error = yield* Effect.flip(run(client))
      assert.strictEqual(error._tag, "LockRedisError", `${deployment}: the read line works without ${missing}`)
      yield* deniedOnly(nodes, missing)
    }

    const releaser = yield* connectAs(
      nodes,
      Acl.adminRules("release", deployment, namespace, credentials.password),
      connect
    )
    assert.isTrue(yield* LockAdmin.forceRelease(releaser, key, { force: true }), "a held lock was released")
    assert.deepStrictEqual(
      yield* Acl.denialsExceptClientSetinfo(nodes),
      [],
      `${deployment}: the release line was refused something`
    )
  }).pipe(Effect.scoped)

const adminDocs = new URL("../../../docs/admin.md", import.meta.url)

describe("LockAdmin least-privilege ACL lines", () => {
  it("docs/admin.md states every line exactly as tested", () => {
    const docs = Fs.readFileSync(adminDocs, "utf8")
    for (const access of Acl.adminAccesses) {
      for (const deployment of Acl.adminDeployments) {
        assert.include(docs, Acl.adminLine(access, deployment, "<namespace>"), `${access} ${deployment}`)
      }
    }
  })

  for (const flavor of ServerBinary.flavorsUnderTest()) {
    it.live(
      `${flavor} standalone: inspect and list read-only, forceRelease with DEL`,
      () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          yield* holdWithWaiter(NodeRedisBackend.layer({ url: server.url }))
          yield* proveAdmin("single", [server], (as) => connectClient(server.url, as))
        }),
      60_000
    )

    it.live(
      `${flavor} Sentinel (data nodes): the single-node lines, through a Sentinel client`,
      () =>
        Effect.gen(function* () {
          const topology = yield* SentinelTopology.start({ flavor, downAfterMillis: 8_000 })
          yield* holdWithWaiter(
            NodeRedisBackend.layerSentinel({ name: topology.masterName, sentinels: topology.sentinelNodes })
          )
          yield* proveAdmin("single", topology.nodes, (as) => connectSentinel(topology, as))
        }),
      90_000
    )

    it.live(
      `${flavor} Cluster: the lines on every node, list scanning every master`,
      () =>
        Effect.gen(function* () {
          const cluster = yield* ClusterTopology.start({ flavor, nodeTimeoutMillis: 8_000 })
          yield* holdWithWaiter(NodeRedisBackend.layerCluster({ rootNodes: [{ url: cluster.nodes[0]?.url ?? "" }] }))
          yield* proveAdmin("cluster", cluster.nodes, (as) => connectCluster(cluster, as))
        }),
      90_000
    )
  }
})
