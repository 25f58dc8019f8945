// The servers the demo runs against: REDIS_URL when given, otherwise throwaway redis-server or
// valkey-server processes started by the test kit on free ports in temp dirs and killed when the scope
// closes: one server (standalone), a cluster of three masters with a replica each (cluster), or a master
// with two replicas watched by three sentinels (sentinel).
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { ClusterTopology, RedisServer, SentinelTopology, ServerBinary, type TestkitError } from "@sage/lock-testkit"
import type { DemoOptions } from "./options.ts"
import type { Connection } from "./protocol.ts"

export interface Target {
  readonly connection: Connection
  /** For display: what the servers are, without credentials (may span several lines). */
  readonly label: string
  /** Whether the server outlives the demo (so the demo cleans up its keys). */
  readonly external: boolean
}

// The demo injects no server faults, so node failure detection is slowed down: a node stalled by a busy
// machine (a parallel test run) must not trigger a failover in the middle of the run.
const clusterNodeTimeoutMillis = 5_000
const sentinelDownAfterMillis = 5_000

const redact = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return "(unparsable REDIS_URL)"
  }
}

/** The binary and the version the server reports, e.g. "/usr/bin/redis-server 7.0.15". */
const describeBinary = (
  bin: string,
  server: RedisServer.RedisServer | undefined
): Effect.Effect<string, TestkitError.TestkitError> =>
  server === undefined
    ? Effect.succeed(bin)
    : server.command("INFO", "server").pipe(
        // Valkey reports redis_version too (the compatibility level), so look for its own first.
        Effect.map(
          (reply) => /valkey_version:(\S+)/.exec(String(reply))?.[1] ?? /redis_version:(\S+)/.exec(String(reply))?.[1]
        ),
        Effect.orElseSucceed(() => undefined),
        Effect.map((version) => (version === undefined ? bin : `${bin} ${version}`))
      )

const nodeList = (nodes: ReadonlyArray<RedisServer.RedisServer>): string =>
  nodes.map((node) => `${node.port} (pid ${node.pid})`).join(", ")

const standalone = (options: DemoOptions): Effect.Effect<Target, TestkitError.TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const bin = yield* ServerBinary.resolve(options.flavor)
    const server = yield* RedisServer.start({ flavor: options.flavor })
    const what = yield* describeBinary(bin, server)
    return {
      connection: { _tag: "standalone", url: server.url },
      label: `${what} (pid ${server.pid}) on ${server.url}, temp dir ${server.dir}`,
      external: false
    }
  })

const cluster = (options: DemoOptions): Effect.Effect<Target, TestkitError.TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const bin = yield* ServerBinary.resolve(options.flavor)
    const masters = 3
    const topology = yield* ClusterTopology.start({
      flavor: options.flavor,
      masters,
      replicasPerMaster: 1,
      nodeTimeoutMillis: clusterNodeTimeoutMillis
    })
    const what = yield* describeBinary(bin, topology.nodes[0])
    return {
      connection: { _tag: "cluster", rootUrls: topology.rootNodes.map(({ host, port }) => `redis://${host}:${port}`) },
      label: [
        `cluster of ${what}, ${masters} masters with a replica each, on 127.0.0.1`,
        `  masters  ${nodeList(topology.nodes.slice(0, masters))}`,
        `  replicas ${nodeList(topology.nodes.slice(masters))}`
      ].join("\n"),
      external: false
    }
  })

const sentinel = (options: DemoOptions): Effect.Effect<Target, TestkitError.TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const bin = yield* ServerBinary.resolve(options.flavor)
    const topology = yield* SentinelTopology.start({
      flavor: options.flavor,
      downAfterMillis: sentinelDownAfterMillis
    })
    const master = yield* topology.master()
    const what = yield* describeBinary(bin, master)
    return {
      connection: { _tag: "sentinel", masterName: topology.masterName, sentinels: topology.sentinelNodes },
      label: [
        `${what}, master "${topology.masterName}" with ${topology.nodes.length - 1} replicas under ` +
          `${topology.sentinels.length} sentinels, on 127.0.0.1`,
        `  master    ${nodeList([master])}`,
        `  replicas  ${nodeList(topology.nodes.filter((node) => node !== master))}`,
        `  sentinels ${nodeList(topology.sentinels)}`
      ].join("\n"),
      external: false
    }
  })

export const acquire = (options: DemoOptions): Effect.Effect<Target, TestkitError.TestkitError, Scope.Scope> => {
  if (options.redisUrl !== undefined) {
    // options.ts allows REDIS_URL with the standalone topology only.
    return Effect.succeed({
      connection: { _tag: "standalone", url: options.redisUrl },
      label: `REDIS_URL ${redact(options.redisUrl)}`,
      external: true
    })
  }
  switch (options.topology) {
    case "standalone":
      return standalone(options)
    case "cluster":
      return cluster(options)
    case "sentinel":
      return sentinel(options)
  }
}
