/**
 * A Redis Cluster for one test scope: `masters` masters with `replicasPerMaster` replicas each, every
 * node a `RedisServer` (own port, own temp directory holding its `nodes.conf`, so `restart` rejoins
 * with the same node id). The cluster is built with plain commands (`CLUSTER ADDSLOTSRANGE`,
 * `SET-CONFIG-EPOCH`, `MEET`, `REPLICATE`) rather than `redis-cli --cluster create`, and `start`
 * returns once every node reports `cluster_state:ok`, the same slot map, and synced replicas.
 * Always local binaries (Docker mode does not apply). Ports come from 10000–22767 with the bus port
 * (port + 10000) checked free as well.
 *
 * Lookups (`masterFor`, `replicaFor`) read `CLUSTER SLOTS` from the first live node. Faults:
 * `failover` (CLUSTER FAILOVER, optionally FORCE or TAKEOVER), and slot migration in steps (see
 * ClusterMigration) so tests can observe ASK and TRYAGAIN in between.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Cluster from "./internal/cluster.ts"
import { done, isLive, logTails, parseInfo, pending, waitUntil } from "./internal/poll.ts"
import * as RedisServer from "./RedisServer.ts"
import * as Replicated from "./Replicated.ts"
import type * as ServerBinary from "./ServerBinary.ts"
import { TestkitError } from "./TestkitError.ts"

/** A `CLUSTER SLOTS` range: start and end slot, master first, then replicas. */
export type SlotRange = Cluster.SlotRange

/** The number of hash slots (16384). */
export const slotCount: number = Cluster.slotCount

/** The hash slot of a key (CRC16 of its hash tag, if any, mod 16384), computed locally. */
export const keySlot = (key: string): number => Cluster.keySlot(key)

/**
 * Options of `start`. Defaults: flavor "redis7", 3 masters, 1 replica per master, node timeout
 * 1000 ms, 20 s to become ready.
 */
export interface StartOptions {
  readonly flavor?: ServerBinary.Flavor | undefined
  readonly masters?: number | undefined
  readonly replicasPerMaster?: number | undefined
  readonly nodeTimeoutMillis?: number | undefined
  /** Extra server arguments for every node. */
  readonly args?: ReadonlyArray<string> | undefined
  readonly readyTimeoutMs?: number | undefined
  /** TLS only on every node, with one CA for all (`certificates`); the cluster bus and replication too. Default false. */
  readonly tls?: boolean | undefined
}

/** A slot's owner and its replicas, as topology nodes. */
export interface Shard {
  readonly master: RedisServer.RedisServer
  readonly replicas: ReadonlyArray<RedisServer.RedisServer>
}

/** A running cluster owned by a scope. */
export interface ClusterTopology {
  readonly flavor: ServerBinary.Flavor
  /** The initial masters first (slots split evenly in order), then the replicas. */
  readonly nodes: ReadonlyArray<RedisServer.RedisServer>
  /** The certificates every node uses (`tls: true`), else undefined. */
  readonly certificates: RedisServer.TlsCertificates | undefined
  /** Every node's address, for a cluster client's root nodes. */
  readonly rootNodes: Array<RedisServer.Address>
  /** The current owner of a slot and its replicas, from `CLUSTER SLOTS` of the first live node. */
  readonly shardForSlot: (slot: number) => Effect.Effect<Shard, TestkitError>
  /** The master that owns the key's slot now. */
  readonly masterFor: (key: string) => Effect.Effect<RedisServer.RedisServer, TestkitError>
  /** The first replica of the key's slot owner (fails if it has none). */
  readonly replicaFor: (key: string) => Effect.Effect<RedisServer.RedisServer, TestkitError>
}

/**
 * The node timeout while the cluster forms, when a longer one is asked for. Nodes learn of each
 * other's replicas by gossip, and a node pings another at the latest after half the node timeout:
 * with 8 s a cluster took 6-8 s to list every replica on every node, with 1 s about 2.6 s. So the
 * nodes start with the asked-for timeout (a restarted node comes back with it), form the cluster
 * with this one, and get theirs back once the cluster is ok.
 */
const formingNodeTimeoutMillis = 1000

/** The flags a cluster node gets before the caller's arguments; `nodes.conf` lives in its temp dir. */
export const clusterArgs = (nodeTimeoutMillis: number): ReadonlyArray<string> => [
  "--cluster-enabled",
  "yes",
  "--cluster-node-timeout",
  String(nodeTimeoutMillis),
  "--cluster-config-file",
  "nodes.conf"
]

/** `CLUSTER MYID` (stable across `restart`, since the node's `nodes.conf` survives it). */
export const nodeId = (node: RedisServer.RedisServer): Effect.Effect<string, TestkitError> =>
  // Asked of six freshly started nodes at once: on a loaded machine a connection alone can take a second.
  Effect.map(node.commandWith({ timeoutMs: 5000 }, "CLUSTER", "MYID"), String)

/** A node's `CLUSTER SLOTS`, parsed. */
export const slots = (node: RedisServer.RedisServer): Effect.Effect<Array<SlotRange>, TestkitError> =>
  Effect.map(node.commandWith({ timeoutMs: 1000 }, "CLUSTER", "SLOTS"), Cluster.parseSlots)

/** A node's `CLUSTER INFO` as field/value pairs (`cluster_state`, `cluster_known_nodes`, ...). */
export const clusterInfo = (node: RedisServer.RedisServer): Effect.Effect<Record<string, string>, TestkitError> =>
  Effect.map(node.commandWith({ timeoutMs: 1000 }, "CLUSTER", "INFO"), (reply) => parseInfo(String(reply)))

const notANode = (port: number): TestkitError =>
  new TestkitError({ reason: "CommandFailed", message: `127.0.0.1:${port} is not a node of this cluster` })

const byPort = (
  nodes: ReadonlyArray<RedisServer.RedisServer>,
  port: number
): Effect.Effect<RedisServer.RedisServer, TestkitError> => {
  const node = nodes.find((candidate) => candidate.port === port)
  return node === undefined ? Effect.fail(notANode(port)) : Effect.succeed(node)
}

/** `CLUSTER SLOTS` from the first live node that answers. */
const currentSlots = (nodes: ReadonlyArray<RedisServer.RedisServer>): Effect.Effect<Array<SlotRange>, TestkitError> =>
  Effect.gen(function* () {
    let last = "no live node"
    for (const node of nodes.filter(isLive)) {
      const outcome = yield* Effect.result(slots(node))
      if (outcome._tag === "Success") return outcome.success
      last = outcome.failure.message
    }
    return yield* new TestkitError({ reason: "CommandFailed", message: `CLUSTER SLOTS: ${last}` })
  })

/** The master's port of every range, as one comparable string. */
const ownersKey = (ranges: ReadonlyArray<SlotRange>): string =>
  ranges
    .map((range) => `${range.start}-${range.end}@${range.master.port}`)
    .toSorted()
    .join(" ")

/** Options of `waitForClusterOk` and `failover`. */
export interface WaitOptions {
  /** Default 10 s. */
  readonly timeoutMs?: number | undefined
}

/**
 * Waits until every live node reports `cluster_state:ok` and the same slot owners in `CLUSTER SLOTS`
 * (and, with `replicasPerRange`, that many replicas in every range of every view).
 */
export const waitForClusterOk = (
  topology: { readonly nodes: ReadonlyArray<RedisServer.RedisServer> },
  options?: WaitOptions & { readonly replicasPerRange?: number | undefined }
): Effect.Effect<void, TestkitError> =>
  waitUntil(
    Effect.gen(function* () {
      let reference: string | undefined
      for (const node of topology.nodes.filter(isLive)) {
        const state = (yield* clusterInfo(node))["cluster_state"]
        if (state !== "ok") return pending(`${node.port}: cluster_state:${state}`)
        const view = yield* slots(node)
        const key = ownersKey(view)
        reference ??= key
        if (key !== reference) return pending(`${node.port} sees owners ${key}, another node ${reference}`)
        const wanted = options?.replicasPerRange
        const short = view.find((range) => wanted !== undefined && range.replicas.length !== wanted)
        if (short !== undefined) {
          return pending(`${node.port}: ${short.start}-${short.end} has ${short.replicas.length} replicas`)
        }
      }
      return done(undefined)
    }),
    {
      what: "cluster_state:ok and one slot map on every live node",
      timeoutMs: options?.timeoutMs ?? 10_000,
      diagnostics: logTails(topology.nodes, 8)
    }
  )

/** The slots master `i` of `count` gets at start: an even split in node order. */
const slotRange = (i: number, count: number): readonly [first: number, last: number] => [
  Math.floor((i * Cluster.slotCount) / count),
  Math.floor(((i + 1) * Cluster.slotCount) / count) - 1
]

/**
 * Starts the nodes concurrently, assigns the slots evenly to the first `masters` nodes, gives every
 * node its own config epoch, introduces all nodes to the first one, attaches replica j to master
 * j mod `masters`, and waits until the cluster is ok everywhere with replicas synced (about 2.7 s,
 * whatever `nodeTimeoutMillis`: the cluster forms with at most 1 s, and the nodes get the asked-for
 * timeout once it is ok). Closing the scope stops every node.
 */
export const start = (options?: StartOptions): Effect.Effect<ClusterTopology, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const flavor = options?.flavor ?? "redis7"
    const masterCount = options?.masters ?? 3
    const perMaster = options?.replicasPerMaster ?? 1
    const total = masterCount * (1 + perMaster)
    const timeoutMs = options?.readyTimeoutMs ?? 20_000
    const nodeTimeoutMillis = options?.nodeTimeoutMillis ?? 1000
    const args = [...clusterArgs(nodeTimeoutMillis), ...(options?.args ?? [])]
    const certificates = options?.tls === true ? yield* RedisServer.makeCertificates : undefined
    const nodes = yield* Effect.forEach(
      Array.from({ length: total }, (_, i) => i),
      () => RedisServer.start({ flavor, args, docker: false, tls: certificates }),
      { concurrency: "unbounded" }
    )
    const ids = yield* Effect.forEach(nodes, nodeId, { concurrency: "unbounded" })
    const diagnostics = logTails(nodes, 8)

    yield* Effect.forEach(
      nodes,
      (node, i) =>
        Effect.gen(function* () {
          if (i < masterCount) {
            const [first, last] = slotRange(i, masterCount)
            yield* node.command("CLUSTER", "ADDSLOTSRANGE", String(first), String(last))
          }
          // Distinct epochs up front spare the cluster its epoch-collision round (as redis-cli does).
          yield* node.command("CLUSTER", "SET-CONFIG-EPOCH", String(i + 1))
        }),
      { concurrency: "unbounded" }
    )
    const setNodeTimeout = (millis: number) =>
      Effect.forEach(nodes, (node) => node.command("CONFIG", "SET", "cluster-node-timeout", String(millis)), {
        concurrency: "unbounded",
        discard: true
      })
    const forming = nodeTimeoutMillis > formingNodeTimeoutMillis
    if (forming) yield* setNodeTimeout(formingNodeTimeoutMillis)
    const [seed] = nodes
    if (seed === undefined) return yield* new TestkitError({ reason: "StartFailed", message: "a cluster needs nodes" })
    yield* Effect.forEach(nodes.slice(1), (node) => seed.command("CLUSTER", "MEET", node.host, String(node.port)), {
      concurrency: "unbounded"
    })
    yield* waitUntil(
      Effect.gen(function* () {
        for (const node of nodes) {
          const known = Cluster.parseNodes(String(yield* node.commandWith({ timeoutMs: 1000 }, "CLUSTER", "NODES")))
          const settled = known.filter(
            (line) => line.linkState === "connected" && !line.flags.some((f) => f === "handshake" || f === "noaddr")
          )
          if (settled.length < total) return pending(`${node.port} knows ${settled.length} of ${total} nodes`)
        }
        return done(undefined)
      }),
      { what: `${total} cluster nodes meeting each other`, timeoutMs, diagnostics }
    )
    yield* Effect.forEach(
      nodes.slice(masterCount),
      (replica, j) => replica.command("CLUSTER", "REPLICATE", ids[j % masterCount] ?? ""),
      { concurrency: "unbounded" }
    )
    yield* Effect.forEach(
      nodes.slice(0, masterCount),
      (master, i) => {
        const [first, last] = slotRange(i, masterCount)
        return Replicated.waitForSync(
          { master, replicas: nodes.slice(masterCount).filter((_, j) => j % masterCount === i) },
          { timeoutMs, primeKey: Cluster.keyInSlots(`${Replicated.defaultPrimeKey}:`, first, last) }
        )
      },
      { concurrency: "unbounded" }
    )
    yield* waitForClusterOk({ nodes }, { timeoutMs, replicasPerRange: perMaster })
    if (forming) yield* setNodeTimeout(nodeTimeoutMillis)

    const shardForSlot = (slot: number): Effect.Effect<Shard, TestkitError> =>
      Effect.gen(function* () {
        const range = (yield* currentSlots(nodes)).find((r) => r.start <= slot && slot <= r.end)
        if (range === undefined) {
          return yield* new TestkitError({ reason: "CommandFailed", message: `slot ${slot} is not served` })
        }
        const master = yield* byPort(nodes, range.master.port)
        const replicas = yield* Effect.forEach(range.replicas, (replica) => byPort(nodes, replica.port))
        return { master, replicas }
      })

    const topology: ClusterTopology = {
      flavor,
      nodes,
      certificates,
      rootNodes: nodes.map((node) => ({ host: node.host, port: node.port })),
      shardForSlot,
      masterFor: (key) => Effect.map(shardForSlot(keySlot(key)), (shard) => shard.master),
      replicaFor: (key) =>
        Effect.flatMap(shardForSlot(keySlot(key)), (shard) => {
          const [replica] = shard.replicas
          return replica === undefined
            ? Effect.fail(new TestkitError({ reason: "CommandFailed", message: `the owner of ${key} has no replica` }))
            : Effect.succeed(replica)
        })
    }
    return topology
  })

/**
 * Makes every node announce `hostname` (same port) to clients: `cluster-announce-hostname` with
 * `cluster-preferred-endpoint-type hostname`, so `CLUSTER SLOTS`, `MOVED` and `ASK` name
 * `hostname:port`, while the nodes keep talking to each other on their real addresses. With a
 * hostname nothing listens on (e.g. "127.0.0.2": the nodes bind 127.0.0.1 only), a client reaches
 * the cluster only through a `nodeAddressMap`, as behind NAT or a proxy. Returns once every live
 * node's `CLUSTER SLOTS` names `hostname` for every node.
 */
export const announceHostname = (
  topology: ClusterTopology,
  hostname: string,
  options?: WaitOptions
): Effect.Effect<void, TestkitError> =>
  Effect.gen(function* () {
    for (const node of topology.nodes) {
      yield* node.command("CONFIG", "SET", "cluster-announce-hostname", hostname)
      yield* node.command("CONFIG", "SET", "cluster-preferred-endpoint-type", "hostname")
    }
    yield* waitUntil(
      Effect.gen(function* () {
        for (const node of topology.nodes.filter(isLive)) {
          const other = (yield* slots(node))
            .flatMap((range) => [range.master, ...range.replicas])
            .find((entry) => entry.host !== hostname)
          if (other !== undefined) return pending(`${node.port} still announces ${other.host}:${other.port}`)
        }
        return done(undefined)
      }),
      {
        what: `every node announcing ${hostname}`,
        timeoutMs: options?.timeoutMs ?? 10_000,
        diagnostics: logTails(topology.nodes, 8)
      }
    )
  })

/** How `CLUSTER FAILOVER` runs: coordinated (default), FORCE (master unreachable) or TAKEOVER (no vote). */
export type FailoverMode = "FORCE" | "TAKEOVER"

/**
 * `CLUSTER FAILOVER [FORCE|TAKEOVER]` on `replica`, then waits until it says `ROLE` master and every
 * live node's `CLUSTER SLOTS` lists it as the owner of a range; returns it.
 *
 * **Gotchas**: the default (coordinated) mode needs the old master to answer; with a paused master
 * use FORCE. The paused master is skipped while waiting and demotes itself right after `resume`.
 */
export const failover = (
  topology: ClusterTopology,
  replica: RedisServer.RedisServer,
  mode?: FailoverMode,
  options?: WaitOptions
): Effect.Effect<RedisServer.RedisServer, TestkitError> =>
  Effect.gen(function* () {
    yield* replica.command("CLUSTER", "FAILOVER", ...(mode === undefined ? [] : [mode]))
    yield* waitUntil(
      Effect.gen(function* () {
        const current = yield* Replicated.role(replica)
        if (current !== "master") return pending(`${replica.port} is still ${current}`)
        for (const node of topology.nodes.filter(isLive)) {
          const view = yield* slots(node)
          if (!view.some((range) => range.master.port === replica.port)) {
            return pending(`${node.port} does not list ${replica.port} as a slot owner yet`)
          }
        }
        return done(undefined)
      }),
      {
        what: `CLUSTER FAILOVER${mode === undefined ? "" : ` ${mode}`} promoting ${replica.port}`,
        timeoutMs: options?.timeoutMs ?? 10_000,
        diagnostics: logTails(topology.nodes, 8)
      }
    )
    return replica
  })
