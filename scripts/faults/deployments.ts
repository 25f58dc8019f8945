// The deployments the fault matrix runs on, started from the test kit for one scope, with what a
// scenario needs to aim its fault: the current master of a lock key, its replicas, every data node,
// and (for the final read of the servers) the master a key settled on after the run. `ioredis`,
// `ioredis-sentinel` and `ioredis-cluster` are the same deployments with the workers on the ioredis
// backend instead of node-redis's.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import {
  Acl,
  ClusterTopology,
  FaultProxy,
  RedisServer,
  Replicated,
  SentinelTopology,
  type ServerBinary,
  type TestkitError
} from "@sage/lock-testkit"
import type { Connection } from "./protocol.ts"

export const deploymentKinds = [
  "standalone",
  "ioredis",
  "sentinel",
  "ioredis-sentinel",
  "cluster",
  "ioredis-cluster"
] as const
export type DeploymentKind = (typeof deploymentKinds)[number]

export interface Deployment {
  readonly kind: DeploymentKind
  readonly flavor: ServerBinary.Flavor
  /** What worker `w` (1-based) connects to: through its own proxies when proxies were asked for. */
  readonly connectionFor: (worker: number) => Connection
  /** Every data node (not the sentinels). */
  readonly nodes: ReadonlyArray<RedisServer.RedisServer>
  readonly sentinel: SentinelTopology.SentinelTopology | undefined
  readonly cluster: ClusterTopology.ClusterTopology | undefined
  /**
   * Per worker (1-based), its proxies in front of every data node, by node port: a network fault can
   * then hit one worker (a partitioned client) or all of them. Empty without the `proxies` option.
   */
  readonly proxies: ReadonlyMap<number, ReadonlyMap<number, FaultProxy.FaultProxy>>
  /** The ACL user the workers log in as, when `aclUser` was asked for. */
  readonly auth: { readonly username: string; readonly password: string } | undefined
  /** The master that owns `redisKey` now. */
  readonly masterFor: (redisKey: string) => Effect.Effect<RedisServer.RedisServer, TestkitError.TestkitError>
  /** The replicas of that master (none on standalone). */
  readonly replicasFor: (
    redisKey: string
  ) => Effect.Effect<ReadonlyArray<RedisServer.RedisServer>, TestkitError.TestkitError>
}

export interface DeploymentOptions {
  /** Extra arguments for every data node. */
  readonly args?: ReadonlyArray<string> | undefined
  /**
   * Create an ACL user with the least privilege the lock needs (see docs/topologies.md) on every data
   * node, and have the workers log in as it (not on Sentinel).
   */
  readonly aclUser?: boolean | undefined
  /** Give each of this many workers its own FaultProxy in front of every data node (not on Sentinel). */
  readonly proxies?: number | undefined
}

const proxiesFor = (nodes: ReadonlyArray<RedisServer.RedisServer>, workers: number) =>
  Effect.gen(function* () {
    const proxies = new Map<number, Map<number, FaultProxy.FaultProxy>>()
    for (let worker = 1; worker <= workers; worker++) {
      const mine = new Map<number, FaultProxy.FaultProxy>()
      for (const node of nodes) mine.set(node.port, yield* FaultProxy.make({ upstreamPort: node.port }))
      proxies.set(worker, mine)
    }
    return proxies
  })

/** The ACL user of `aclUser` deployments: its name, password and rules (least privilege, namespace "faults"). */
export const aclUser = { username: "locker", password: "locker-pw" } as const
export const aclRules = (commands: ReadonlyArray<string>): Array<string> => [
  "on",
  `>${aclUser.password}`,
  "resetkeys",
  "~faults:*",
  "resetchannels",
  "&faults:*",
  "-@all",
  ...commands.map((command) => `+${command}`)
]
/** Every command a lock on standalone or Cluster (acknowledgement on) may run: docs/topologies.md. */
export const lockCommands: ReadonlyArray<string> = [
  ...Acl.commands("standalone"),
  ...Acl.commands("cluster").filter((command) => !Acl.commands("standalone").includes(command))
]

const createAclUser = (nodes: ReadonlyArray<RedisServer.RedisServer>, options: DeploymentOptions) =>
  options.aclUser === true
    ? Effect.as(
        Effect.forEach(nodes, (node) => node.command("ACL", "SETUSER", aclUser.username, ...aclRules(lockCommands)), {
          discard: true
        }),
        { username: aclUser.username, password: aclUser.password }
      )
    : Effect.succeed(undefined)

const standalone = (flavor: ServerBinary.Flavor, options: DeploymentOptions, client: "node-redis" | "ioredis") =>
  Effect.gen(function* () {
    const server = yield* RedisServer.start({ flavor, args: options.args })
    const proxies = yield* proxiesFor([server], options.proxies ?? 0)
    const deployment: Deployment = {
      kind: client === "ioredis" ? "ioredis" : "standalone",
      flavor,
      connectionFor: (worker) => ({
        _tag: "standalone",
        url: proxies.get(worker)?.get(server.port)?.url ?? server.url,
        client
      }),
      nodes: [server],
      sentinel: undefined,
      cluster: undefined,
      proxies,
      auth: yield* createAclUser([server], options),
      masterFor: () => Effect.succeed(server),
      replicasFor: () => Effect.succeed([])
    }
    return deployment
  })

const sentinel = (flavor: ServerBinary.Flavor, options: DeploymentOptions, client: "node-redis" | "ioredis") =>
  Effect.gen(function* () {
    const topology = yield* SentinelTopology.start({ flavor, args: options.args })
    const deployment: Deployment = {
      kind: client === "ioredis" ? "ioredis-sentinel" : "sentinel",
      flavor,
      connectionFor: () => ({
        _tag: "sentinel",
        masterName: topology.masterName,
        sentinels: topology.sentinelNodes,
        client
      }),
      nodes: topology.nodes,
      sentinel: topology,
      cluster: undefined,
      proxies: new Map(),
      auth: undefined,
      masterFor: () => topology.master(),
      replicasFor: () => topology.replicas()
    }
    return deployment
  })

const cluster = (flavor: ServerBinary.Flavor, options: DeploymentOptions, client: "node-redis" | "ioredis") =>
  Effect.gen(function* () {
    const topology = yield* ClusterTopology.start({ flavor, args: options.args })
    const proxies = yield* proxiesFor(topology.nodes, options.proxies ?? 0)
    const connectionFor = (worker: number): Connection => {
      const mine = proxies.get(worker)
      const rootUrls = topology.nodes.slice(0, 3).map((node) => mine?.get(node.port)?.url ?? node.url)
      if (mine === undefined) return { _tag: "cluster", rootUrls, client }
      const addressMap = Object.fromEntries(
        [...mine].map(([port, proxy]) => [`127.0.0.1:${port}`, { host: "127.0.0.1", port: proxy.port }])
      )
      return { _tag: "cluster", rootUrls, addressMap, client }
    }
    const deployment: Deployment = {
      kind: client === "ioredis" ? "ioredis-cluster" : "cluster",
      flavor,
      connectionFor,
      nodes: topology.nodes,
      sentinel: undefined,
      cluster: topology,
      proxies,
      auth: yield* createAclUser(topology.nodes, options),
      masterFor: (key) => topology.masterFor(key),
      replicasFor: (key) => Effect.map(topology.shardForSlot(ClusterTopology.keySlot(key)), (shard) => shard.replicas)
    }
    return deployment
  })

/** Starts one deployment for the current scope. */
export const start = (
  kind: DeploymentKind,
  flavor: ServerBinary.Flavor,
  options: DeploymentOptions = {}
): Effect.Effect<Deployment, TestkitError.TestkitError, Scope.Scope> => {
  switch (kind) {
    case "standalone":
      return standalone(flavor, options, "node-redis")
    case "ioredis":
      return standalone(flavor, options, "ioredis")
    case "sentinel":
      return sentinel(flavor, options, "node-redis")
    case "ioredis-sentinel":
      return sentinel(flavor, options, "ioredis")
    case "cluster":
      return cluster(flavor, options, "node-redis")
    case "ioredis-cluster":
      return cluster(flavor, options, "ioredis")
  }
}

/**
 * The master that owns `redisKey` now, read with care for what the run's faults leave behind: on
 * Sentinel the node every live Sentinel has settled on (a resumed or restarted old master answers
 * `ROLE` = master for ~10 s, and one Sentinel may still name it), on Cluster the slot's master in
 * the slot map once its own `ROLE` agrees (a demoted master keeps the slot map's old view briefly).
 */
export const settledMasterFor = (
  deployment: Deployment,
  redisKey: string
): Effect.Effect<RedisServer.RedisServer, TestkitError.TestkitError> =>
  Effect.gen(function* () {
    if (deployment.sentinel !== undefined) {
      return yield* SentinelTopology.waitForMaster(deployment.sentinel, () => true, { timeoutMs: 15_000 })
    }
    for (let attempt = 0; ; attempt++) {
      const master = yield* deployment.masterFor(redisKey)
      if (deployment.cluster === undefined || (yield* Replicated.role(master)) === "master" || attempt >= 50) {
        return master
      }
      yield* Effect.sleep(100)
    }
  })
