/**
 * A master with replicas (`--replicaof`), every node a `RedisServer` of the same scope, plus the
 * replication faults the lock suites need: freezing a replica so `WAIT` cannot be satisfied, and
 * cutting the replication links so an unacknowledged write can really be lost.
 *
 * Nodes are always local binaries (Docker mode does not apply: the nodes reach each other on
 * 127.0.0.1). What it does not do: no Sentinel (see SentinelTopology), no automatic re-pointing.
 * A restarted replica comes back with its original `--replicaof` (the first master's port); a
 * restarted master comes back empty and its replicas resync to that empty data set.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { done, logTails, parseInfo, pending, waitUntil } from "./internal/poll.ts"
import * as RedisServer from "./RedisServer.ts"
import type * as ServerBinary from "./ServerBinary.ts"
import type { TestkitError } from "./TestkitError.ts"

/** Options of `start`. Defaults: flavor "redis7", 2 replicas, no extra arguments, 10 s sync timeout. */
export interface StartOptions {
  readonly flavor?: ServerBinary.Flavor | undefined
  readonly replicas?: number | undefined
  /** Extra server arguments for every node (master and replicas). */
  readonly args?: ReadonlyArray<string> | undefined
  /** How long to wait for the replicas' links and `connected_slaves` after starting. */
  readonly syncTimeoutMs?: number | undefined
  /**
   * TLS only, on every node, with one CA for all (see `RedisServer.StartOptions.tls`); replication
   * runs over TLS too. `true` makes the certificates; the nodes' `tls` field holds them. Default false.
   */
  readonly tls?: boolean | RedisServer.TlsCertificates | undefined
}

/** A master and its replicas, owned by a scope. */
export interface Replicated {
  readonly flavor: ServerBinary.Flavor
  readonly master: RedisServer.RedisServer
  readonly replicas: ReadonlyArray<RedisServer.RedisServer>
  /** The master first, then the replicas. */
  readonly nodes: ReadonlyArray<RedisServer.RedisServer>
}

/** A node's replication role as `ROLE` reports it (a demoted master says "slave" on every flavor). */
export type Role = "master" | "slave" | "sentinel"

/** `ROLE`, element 0. */
export const role = (server: RedisServer.RedisServer): Effect.Effect<Role, TestkitError> =>
  Effect.map(server.commandWith({ timeoutMs: 1000 }, "ROLE"), (reply): Role => {
    const first = Array.isArray(reply) ? String(reply[0]) : String(reply)
    return first === "master" || first === "sentinel" ? first : "slave"
  })

/** `INFO replication` as field/value pairs (`role`, `master_link_status`, `connected_slaves`, ...). */
export const replicationInfo = (server: RedisServer.RedisServer): Effect.Effect<Record<string, string>, TestkitError> =>
  Effect.map(server.commandWith({ timeoutMs: 1000 }, "INFO", "replication"), (reply) => parseInfo(String(reply)))

/** The ports of the replicas a master lists as `state=online` (`slaveN:ip=...,port=...,state=...`). */
const onlineReplicaPorts = (info: Record<string, string>): Set<number> => {
  const ports = new Set<number>()
  for (const [field, value] of Object.entries(info)) {
    if (!/^slave\d+$/.test(field)) continue
    const entry = Object.fromEntries(value.split(",").map((pair) => pair.split("=", 2)))
    if (entry["state"] === "online") ports.add(Number(entry["port"]))
  }
  return ports
}

/** Waits until `ROLE` of `server` is `wanted` (default timeout 15 s); e.g. Sentinel's late demotion. */
export const waitForRole = (
  server: RedisServer.RedisServer,
  wanted: Role,
  options?: { readonly timeoutMs?: number | undefined }
): Effect.Effect<void, TestkitError> =>
  waitUntil(
    Effect.map(role(server), (current) => (current === wanted ? done(undefined) : pending(`ROLE ${current}`))),
    {
      what: `ROLE ${wanted} on ${server.port}`,
      timeoutMs: options?.timeoutMs ?? 15_000,
      intervalMs: 100,
      diagnostics: server.logTail(12)
    }
  )

/** Options of `waitForSync`. */
export interface WaitForSyncOptions {
  /** Default 10 s. */
  readonly timeoutMs?: number | undefined
  /**
   * The key written and deleted on the master to check that `WAIT` counts every replica; default
   * "sage-testkit:prime". In a cluster it must hash to a slot the master owns.
   */
  readonly primeKey?: string | undefined
}

/** The key `waitForSync` writes and deletes by default. */
export const defaultPrimeKey: string = "sage-testkit:prime"

/**
 * Waits until every replica has `master_link_status:up` towards `master` and has processed the
 * master's replication offset as of the call, the master lists each of them as `state=online`, and
 * a write (SET then DEL of `primeKey`) followed by `WAIT` on the same connection counts them all.
 * After it returns, every write the master had accepted is on every replica.
 *
 * **Gotchas**: a paused replica never syncs, so this times out (with the nodes' log tails).
 */
export const waitForSync = (
  topology: { readonly master: RedisServer.RedisServer; readonly replicas: ReadonlyArray<RedisServer.RedisServer> },
  options?: WaitForSyncOptions
): Effect.Effect<void, TestkitError> =>
  Effect.gen(function* () {
    const { master, replicas } = topology
    const target = yield* Effect.map(replicationInfo(master), (info) => Number(info["master_repl_offset"] ?? 0))
    yield* waitUntil(
      Effect.gen(function* () {
        const info = yield* replicationInfo(master)
        const connected = Number(info["connected_slaves"] ?? 0)
        if (connected < replicas.length) return pending(`master ${master.port}: connected_slaves:${connected}`)
        const online = onlineReplicaPorts(info)
        for (const replica of replicas) {
          // WAIT counts only replicas the master has put online (after their first ACK), not just connected.
          if (!online.has(replica.port)) return pending(`master ${master.port}: replica ${replica.port} not online`)
          const fields = yield* replicationInfo(replica)
          const link = fields["master_link_status"]
          if (Number(fields["master_port"]) !== master.port || link !== "up") {
            return pending(`replica ${replica.port}: master_port ${fields["master_port"]}, link ${link}`)
          }
          const offset = Number(fields["slave_repl_offset"] ?? -1)
          if (offset < target) return pending(`replica ${replica.port}: offset ${offset} < ${target}`)
        }
        if (replicas.length === 0) return done(undefined)
        // After a full sync the master streams nothing to a replica until its first ACK, which Redis
        // 7.0 sometimes sends only with its once-a-second cron: a first WAIT can then take ~0.7 s. One
        // write + WAIT here absorbs that, so tests can use short WAIT timeouts.
        const key = options?.primeKey ?? defaultPrimeKey
        const replies = yield* master.session([
          ["SET", key, "1"],
          ["DEL", key],
          ["WAIT", String(replicas.length), "2000"]
        ])
        const acked = Number(replies[2])
        return acked >= replicas.length ? done(undefined) : pending(`WAIT counted ${acked} of ${replicas.length}`)
      }),
      {
        what: `replicas ${replicas.map((r) => r.port).join(",")} in sync with master ${master.port}`,
        timeoutMs: options?.timeoutMs ?? 10_000,
        diagnostics: logTails([master, ...replicas])
      }
    )
  })

/**
 * Starts a master and `replicas` replicas (`--replicaof 127.0.0.1 <masterPort>`, started concurrently)
 * and waits until all are in sync (`waitForSync`). Closing the scope stops every node.
 */
export const start = (options?: StartOptions): Effect.Effect<Replicated, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const flavor = options?.flavor ?? "redis7"
    const args = options?.args ?? []
    const count = options?.replicas ?? 2
    const tls = options?.tls === true ? yield* RedisServer.makeCertificates : options?.tls || undefined
    const master = yield* RedisServer.start({ flavor, args, docker: false, tls })
    const replicas = yield* Effect.forEach(
      Array.from({ length: count }, (_, i) => i),
      () =>
        RedisServer.start({
          flavor,
          args: [...args, "--replicaof", master.host, String(master.port)],
          docker: false,
          tls
        }),
      { concurrency: "unbounded" }
    )
    yield* waitForSync({ master, replicas }, { timeoutMs: options?.syncTimeoutMs })
    return { flavor, master, replicas, nodes: [master, ...replicas] }
  })

/**
 * `CLIENT KILL TYPE replica` on the master: closes every replication link; returns how many.
 *
 * **Details**: the replicas reconnect within about a second and catch up from the backlog (PSYNC),
 * so cutting alone loses nothing. To lose an unacknowledged write (scenario SE3), freeze the replicas
 * first (`stopReplica`), cut, write, then kill the master before the replicas resume.
 * Freezing alone does not lose it: the stream waits in the frozen replica's socket buffer.
 */
export const cutReplicationLinks = (master: RedisServer.RedisServer): Effect.Effect<number, TestkitError> =>
  Effect.map(master.command("CLIENT", "KILL", "TYPE", "replica"), Number)

/** SIGSTOP a replica: it stops acknowledging, so `WAIT` cannot count it (the master still lists it). */
export const stopReplica = (replica: RedisServer.RedisServer): Effect.Effect<void, TestkitError> => replica.pause

/** SIGCONT a replica stopped by `stopReplica`; it applies whatever was buffered meanwhile. */
export const resumeReplica = (replica: RedisServer.RedisServer): Effect.Effect<void, TestkitError> => replica.resume
