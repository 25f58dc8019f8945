/**
 * A Sentinel deployment for one test scope: a replicated master (see Replicated) watched by several
 * Sentinels (`RedisServer.start({ sentinel: true })`), each in its own temp directory with a
 * writable config file. `start` returns once every Sentinel sees every replica and every other
 * Sentinel, so a failover can be requested at once. `master()` asks the way a client does
 * (`SENTINEL get-master-addr-by-name`); `failover` and `waitForMaster` wait until every Sentinel has
 * finished the failover and agrees on the new master.
 *
 * Always local binaries (Docker mode does not apply). What it does not do: it re-points nodes only
 * when asked (`failover` with `repointNodes`); otherwise Sentinel does, and an old master (demoted by
 * a failover, or killed and restarted) answers `ROLE` = master for ~10 s until Sentinel converts it.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { done, isLive, logTails, parsePairs, pending, waitUntil } from "./internal/poll.ts"
import * as RedisServer from "./RedisServer.ts"
import * as Replicated from "./Replicated.ts"
import type * as ServerBinary from "./ServerBinary.ts"
import { TestkitError } from "./TestkitError.ts"

/** A host and port (the same type as `RedisServer.Address`). */
export type Address = RedisServer.Address

/**
 * Options of `start`. Defaults: flavor "redis7", 2 replicas, 3 sentinels, master name "mymaster",
 * quorum a majority of the sentinels (2 of 3), down-after 1000 ms, failover-timeout 5000 ms,
 * 15 s to become ready.
 */
export interface StartOptions {
  readonly flavor?: ServerBinary.Flavor | undefined
  readonly replicas?: number | undefined
  readonly sentinels?: number | undefined
  readonly masterName?: string | undefined
  readonly quorum?: number | undefined
  readonly downAfterMillis?: number | undefined
  readonly failoverTimeoutMillis?: number | undefined
  /** Extra server arguments for the data nodes (not the sentinels). */
  readonly args?: ReadonlyArray<string> | undefined
  readonly readyTimeoutMs?: number | undefined
  /**
   * TLS only, on the data nodes and the sentinels alike, with one CA for all (`certificates`):
   * replication and every connection a sentinel opens run over TLS. Default false.
   */
  readonly tls?: boolean | undefined
}

/** A running Sentinel deployment owned by a scope. */
export interface SentinelTopology {
  readonly flavor: ServerBinary.Flavor
  readonly masterName: string
  /** Every data node: the first master, then the replicas (roles change on failover). */
  readonly nodes: ReadonlyArray<RedisServer.RedisServer>
  /** The Sentinel processes (pause, kill and restart work as on any RedisServer). */
  readonly sentinels: ReadonlyArray<RedisServer.RedisServer>
  /** The certificates every node and sentinel uses (`tls: true`), else undefined. */
  readonly certificates: RedisServer.TlsCertificates | undefined
  /** The Sentinels' addresses, for a client's `sentinelRootNodes`. */
  readonly sentinelNodes: Array<Address>
  /** The master as the first answering Sentinel reports it (`SENTINEL get-master-addr-by-name`). */
  readonly master: () => Effect.Effect<RedisServer.RedisServer, TestkitError>
  /** The data nodes other than the current master, as the Sentinels report it. */
  readonly replicas: () => Effect.Effect<ReadonlyArray<RedisServer.RedisServer>, TestkitError>
}

const askTimeoutMs = 1000

const masterAddress = (sentinel: RedisServer.RedisServer, name: string): Effect.Effect<Address, TestkitError> =>
  Effect.flatMap(
    sentinel.commandWith({ timeoutMs: askTimeoutMs }, "SENTINEL", "get-master-addr-by-name", name),
    (reply) =>
      Array.isArray(reply) && reply.length === 2
        ? Effect.succeed({ host: String(reply[0]), port: Number(reply[1]) })
        : Effect.fail(
            new TestkitError({
              reason: "CommandFailed",
              message: `sentinel ${sentinel.port} does not know master "${name}" (reply ${JSON.stringify(reply)})`
            })
          )
  )

const nodeAt = (
  nodes: ReadonlyArray<RedisServer.RedisServer>,
  address: Address
): Effect.Effect<RedisServer.RedisServer, TestkitError> => {
  const node = nodes.find((candidate) => candidate.port === address.port)
  return node === undefined
    ? Effect.fail(
        new TestkitError({
          reason: "CommandFailed",
          message: `the sentinels report master ${address.host}:${address.port}, which is not a node of this topology`
        })
      )
    : Effect.succeed(node)
}

/**
 * The master every live Sentinel has settled on, or a pending state. Settled means `SENTINEL MASTER`
 * has flags exactly "master": no failover in progress, not down. During a failover
 * `get-master-addr-by-name` already names the promoted replica, but the leader is still re-pointing
 * the other replicas; a master killed in that window can leave that Sentinel stuck on the dead node.
 */
const settledMaster = (
  sentinels: ReadonlyArray<RedisServer.RedisServer>,
  name: string
): Effect.Effect<Address | string, TestkitError> =>
  Effect.gen(function* () {
    const live = sentinels.filter(isLive)
    if (live.length === 0) return "no live sentinel"
    const views = yield* Effect.forEach(
      live,
      (sentinel) =>
        Effect.map(sentinel.commandWith({ timeoutMs: askTimeoutMs }, "SENTINEL", "MASTER", name), (reply) => ({
          sentinel,
          fields: parsePairs(reply)
        })),
      { concurrency: "unbounded" }
    )
    const busy = views.find((view) => view.fields["flags"] !== "master")
    if (busy !== undefined) return `sentinel ${busy.sentinel.port}: flags ${busy.fields["flags"]}`
    const ports = new Set(views.map((view) => Number(view.fields["port"])))
    const [port] = ports
    return ports.size === 1 && port !== undefined
      ? { host: views[0]?.fields["ip"] ?? "127.0.0.1", port }
      : `sentinels disagree: ${[...ports].join(" / ")}`
  })

/** Options of `waitForMaster`. */
export interface WaitOptions {
  /** Default 15 s. */
  readonly timeoutMs?: number | undefined
}

/** Options of `failover`. */
export interface FailoverOptions extends WaitOptions {
  /**
   * Also point every other live data node at the new master right away (`REPLICAOF`) and wait until
   * they are in sync (`Replicated.waitForSync`). Sentinel does this itself, but converts the old
   * master only at its next INFO poll, ~10 s later. Default false: the old master keeps answering
   * `ROLE` = master meanwhile, as in a real deployment.
   */
  readonly repointNodes?: boolean | undefined
}

/**
 * Waits until every live Sentinel has finished any failover and reports the same master, that node
 * satisfies `predicate`, and its own `ROLE` says master; returns it. Typical use after killing the master:
 * `waitForMaster(topology, (node) => node.port !== old.port)`.
 */
export const waitForMaster = (
  topology: SentinelTopology,
  predicate: (node: RedisServer.RedisServer) => boolean,
  options?: WaitOptions
): Effect.Effect<RedisServer.RedisServer, TestkitError> =>
  waitUntil(
    Effect.gen(function* () {
      const agreed = yield* settledMaster(topology.sentinels, topology.masterName)
      if (typeof agreed === "string") return pending(agreed)
      const node = yield* nodeAt(topology.nodes, agreed)
      if (!predicate(node)) return pending(`sentinels report ${node.port}, which does not match`)
      const current = yield* Replicated.role(node)
      return current === "master" ? done(node) : pending(`sentinels report ${node.port}, whose ROLE is ${current}`)
    }),
    {
      what: `sentinels agreeing on a new master for ${topology.masterName}`,
      timeoutMs: options?.timeoutMs ?? 15_000,
      intervalMs: 50,
      diagnostics: logTails([...topology.sentinels, ...topology.nodes], 8)
    }
  )

/**
 * `SENTINEL FAILOVER <name>` on the first live Sentinel, then `waitForMaster` for a node other than
 * the old master; returns the new master.
 *
 * **Gotchas**: Sentinel reports the new master as soon as it is promoted, but converts the old
 * master into a replica only ~10 s later (measured 10.5–11.5 s on Redis 7.0 and Valkey 8.0): until
 * then the old master answers `ROLE` = master and accepts writes. Pass `repointNodes: true` for a
 * settled topology at once.
 *
 * **Details**: returns once the failover has ended on every Sentinel (~1 s after the promotion),
 * so killing the new master right away triggers a clean automatic failover. `INPROG` and
 * `NOGOODSLAVE` replies are retried until `timeoutMs` (one budget for the request, another for the
 * outcome).
 */
export const failover = (
  topology: SentinelTopology,
  options?: FailoverOptions
): Effect.Effect<RedisServer.RedisServer, TestkitError> =>
  Effect.gen(function* () {
    const timeoutMs = options?.timeoutMs ?? 15_000
    const old = yield* topology.master()
    const sentinel = topology.sentinels.find(isLive)
    if (sentinel === undefined) {
      return yield* new TestkitError({ reason: "CommandFailed", message: "failover: no live sentinel" })
    }
    yield* waitUntil(
      Effect.map(
        sentinel.commandWith(
          { timeoutMs: askTimeoutMs, errorReplyAsValue: true },
          "SENTINEL",
          "FAILOVER",
          topology.masterName
        ),
        (reply) => (String(reply) === "OK" ? done(undefined) : pending(String(reply)))
      ),
      { what: `SENTINEL FAILOVER ${topology.masterName} accepted`, timeoutMs, intervalMs: 200 }
    )
    const promoted = yield* waitForMaster(topology, (node) => node.port !== old.port, { timeoutMs })
    if (options?.repointNodes === true) {
      const others = topology.nodes.filter((node) => node !== promoted && isLive(node))
      yield* Effect.forEach(others, (node) => node.command("REPLICAOF", promoted.host, String(promoted.port)), {
        discard: true
      })
      yield* Replicated.waitForSync({ master: promoted, replicas: others }, { timeoutMs })
    }
    return promoted
  })

const sentinelReady = (
  sentinel: RedisServer.RedisServer,
  name: string,
  replicas: number,
  sentinels: number
): Effect.Effect<string | undefined, TestkitError> =>
  Effect.gen(function* () {
    const master = parsePairs(yield* sentinel.commandWith({ timeoutMs: askTimeoutMs }, "SENTINEL", "MASTER", name))
    if (master["flags"] !== "master") return `sentinel ${sentinel.port}: master flags ${master["flags"]}`
    const seen = { replicas: Number(master["num-slaves"]), sentinels: Number(master["num-other-sentinels"]) }
    if (seen.replicas !== replicas || seen.sentinels !== sentinels - 1) {
      return `sentinel ${sentinel.port}: ${seen.replicas} replicas, ${seen.sentinels} other sentinels`
    }
    const listed = yield* sentinel.commandWith({ timeoutMs: askTimeoutMs }, "SENTINEL", "REPLICAS", name)
    const flags = (Array.isArray(listed) ? listed : []).map((entry) => parsePairs(entry)["flags"])
    if (!flags.every((flag) => flag === "slave")) return `sentinel ${sentinel.port}: replica flags ${flags}`
    // Known is not yet connected: a sentinel links to the others it heard of on its next timer tick,
    // and a test counting each sentinel's clients must not see those links arrive later.
    const others = yield* sentinel.commandWith({ timeoutMs: askTimeoutMs }, "SENTINEL", "SENTINELS", name)
    const links = (Array.isArray(others) ? others : []).map((entry) => parsePairs(entry)["flags"] ?? "")
    return links.every((flag) => !flag.includes("disconnected"))
      ? undefined
      : `sentinel ${sentinel.port}: links to other sentinels ${links}`
  })

/** Sentinel's hello period (`SENTINEL DEBUG publish-period`), and the one used while the sentinels meet. */
const defaultPublishPeriodMillis = 2000
const formingPublishPeriodMillis = 100

/**
 * Starts a replicated master (`Replicated.start`) and `sentinels` Sentinels that monitor it
 * (`SENTINEL MONITOR name 127.0.0.1 <port> <quorum>`, `down-after-milliseconds`, `failover-timeout`,
 * `parallel-syncs 1`), then waits until each Sentinel sees all replicas (flag `slave`) and all other
 * Sentinels, connected to each. The Sentinels publish their hellos every 100 ms until then (`SENTINEL DEBUG
 * publish-period`), and every 2 s, Sentinel's default, after: a start takes 0.5-1.5 s instead of 2-3 s.
 * Closing the scope stops all.
 */
export const start = (options?: StartOptions): Effect.Effect<SentinelTopology, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const flavor = options?.flavor ?? "redis7"
    const masterName = options?.masterName ?? "mymaster"
    const count = options?.sentinels ?? 3
    const replicaCount = options?.replicas ?? 2
    const quorum = options?.quorum ?? Math.floor(count / 2) + 1
    const certificates = options?.tls === true ? yield* RedisServer.makeCertificates : undefined
    const [replicated, sentinels] = yield* Effect.all(
      [
        Replicated.start({ flavor, replicas: replicaCount, args: options?.args, tls: certificates }),
        Effect.forEach(
          Array.from({ length: count }, (_, i) => i),
          () => RedisServer.start({ flavor, sentinel: true, tls: certificates }),
          { concurrency: "unbounded" }
        )
      ],
      { concurrency: "unbounded" }
    )
    const { master } = replicated
    // Fast hellos while the sentinels meet (see the doc comment above).
    const setPublishPeriod = (millis: number) =>
      Effect.forEach(sentinels, (sentinel) => sentinel.command("SENTINEL", "DEBUG", "publish-period", String(millis)), {
        concurrency: "unbounded",
        discard: true
      })
    yield* setPublishPeriod(formingPublishPeriodMillis)
    yield* Effect.forEach(
      sentinels,
      (sentinel) =>
        Effect.andThen(
          sentinel.command("SENTINEL", "MONITOR", masterName, master.host, String(master.port), String(quorum)),
          // prettier-ignore
          sentinel.command(
            "SENTINEL", "SET", masterName,
            "down-after-milliseconds", String(options?.downAfterMillis ?? 1000),
            "failover-timeout", String(options?.failoverTimeoutMillis ?? 5000),
            "parallel-syncs", "1"
          )
        ),
      { concurrency: "unbounded" }
    )
    yield* waitUntil(
      Effect.gen(function* () {
        for (const sentinel of sentinels) {
          const problem = yield* sentinelReady(sentinel, masterName, replicaCount, count)
          if (problem !== undefined) return pending(problem)
        }
        return done(undefined)
      }),
      {
        what: `${count} sentinels seeing ${replicaCount} replicas and each other`,
        timeoutMs: options?.readyTimeoutMs ?? 15_000,
        intervalMs: 100,
        diagnostics: logTails([...sentinels, ...replicated.nodes], 8)
      }
    )
    yield* setPublishPeriod(defaultPublishPeriodMillis)

    const nodes = replicated.nodes
    const currentMaster = (): Effect.Effect<RedisServer.RedisServer, TestkitError> =>
      Effect.gen(function* () {
        let lastError: TestkitError | undefined
        for (const sentinel of sentinels.filter(isLive)) {
          const address = yield* Effect.result(masterAddress(sentinel, masterName))
          if (address._tag === "Success") return yield* nodeAt(nodes, address.success)
          lastError = address.failure
        }
        return yield* new TestkitError({
          reason: "CommandFailed",
          message: `no live sentinel answered get-master-addr-by-name ${masterName}${
            lastError === undefined ? "" : `: ${lastError.message}`
          }`
        })
      })

    const topology: SentinelTopology = {
      flavor,
      masterName,
      nodes,
      sentinels,
      certificates,
      sentinelNodes: sentinels.map((sentinel) => ({ host: sentinel.host, port: sentinel.port })),
      master: currentMaster,
      replicas: () => Effect.map(currentMaster(), (current) => nodes.filter((node) => node.port !== current.port))
    }
    return topology
  })
