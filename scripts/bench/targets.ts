// The deployments the bench measures, each a scope: throwaway servers from the test kit on loopback
// ports (killed when the scope closes) and the @sage/lock-node-redis backend connected to them. The
// backend is wrapped so that the sections can time its acquire, renew and release calls separately.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import type { Backend } from "@sage/lock/LockBackend"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import {
  ClusterTopology,
  RedisServer,
  SentinelTopology,
  type ServerBinary,
  type TestkitError
} from "@sage/lock-testkit"
import { now } from "./stats.ts"

export type Topology = "standalone" | "sentinel" | "cluster"

/** Durations (ms) of the backend calls made while `recording` is on, and how many of them failed. */
export interface Recorder {
  recording: boolean
  readonly acquire: Array<number>
  readonly renew: Array<number>
  readonly release: Array<number>
  /** Calls that failed or were cut off by the lock's own timeout (the lock retries those). */
  failures: number
}

export interface Deployment {
  readonly topology: Topology
  readonly flavor: ServerBinary.Flavor
  /** For tables: "standalone redis7", "sentinel redis7", ... */
  readonly name: string
  /** For the header: what runs, e.g. "redis 7.0.15, master + 2 replicas, 3 sentinels". */
  readonly description: string
  readonly backend: Backend
  readonly recorder: Recorder
  /** The server's URL (standalone only): the raw node-redis section connects to it directly. */
  readonly url: string | undefined
  /**
   * The URL of the master (Sentinel only) and how many replicas it has: the replicated bench
   * (`replicated.ts`) measures a hand-written node-redis floor on it.
   */
  readonly master?: { readonly url: string; readonly replicas: number } | undefined
}

type StartError = TestkitError.TestkitError | LockRedisError | InvalidArgument

// No faults are injected, so failure detection is slowed down: a node stalled for a moment by a busy
// 2-core machine must not start a failover in the middle of a measurement.
const downAfterMillis = 8_000
const nodeTimeoutMillis = 8_000

/** Times every call into the recorder while it records; the wrapper costs well under a microsecond. */
const instrument = (backend: Backend, recorder: Recorder): Backend => {
  const timed =
    <A>(
      samples: Array<number>,
      run: (request: Parameters<Backend["acquire"]>[0]) => Effect.Effect<A, LockRedisError>
    ) =>
    (request: Parameters<Backend["acquire"]>[0]): Effect.Effect<A, LockRedisError> =>
      Effect.suspend(() => {
        if (!recorder.recording) return run(request)
        const start = now()
        return Effect.onExit(run(request), (exit) =>
          Effect.sync(() => {
            samples.push(now() - start)
            if (Exit.isFailure(exit)) recorder.failures++
          })
        )
      })
  const renewAll = backend.renewAll
  return {
    description: backend.description,
    acquire: timed(recorder.acquire, backend.acquire),
    renew: timed(recorder.renew, backend.renew),
    release: timed(recorder.release, backend.release),
    check: backend.check,
    // A batched renewal is timed as one renewal sample (with one lock held, it is one).
    ...(renewAll === undefined
      ? {}
      : {
          renewAll: (requests: Parameters<NonNullable<Backend["renewAll"]>>[0]) =>
            Effect.suspend(() => {
              if (!recorder.recording) return renewAll(requests)
              const start = now()
              return Effect.tap(renewAll(requests), () => Effect.sync(() => recorder.renew.push(now() - start)))
            })
        }),
    wakeups: backend.wakeups
  }
}

const makeRecorder = (): Recorder => ({ recording: false, acquire: [], renew: [], release: [], failures: 0 })

/** "redis 7.0.15" or "valkey 8.0.1", from INFO (Valkey also reports a redis_version for compatibility). */
const version = (server: RedisServer.RedisServer): Effect.Effect<string> =>
  server.command("INFO", "server").pipe(
    Effect.map((reply) => {
      const text = String(reply)
      const valkey = /valkey_version:(\S+)/.exec(text)?.[1]
      if (valkey !== undefined) return `valkey ${valkey}`
      return `redis ${/redis_version:(\S+)/.exec(text)?.[1] ?? "?"}`
    }),
    Effect.orElseSucceed(() => server.flavor)
  )

const deployment = (
  topology: Topology,
  flavor: ServerBinary.Flavor,
  description: string,
  backend: Backend,
  url: string | undefined,
  master?: Deployment["master"]
): Deployment => {
  const recorder = makeRecorder()
  return {
    topology,
    flavor,
    name: `${topology} ${flavor}`,
    description,
    backend: instrument(backend, recorder),
    recorder,
    url,
    master
  }
}

/** One server. */
export const standalone = Effect.fnUntraced(function* (
  flavor: ServerBinary.Flavor
): Effect.fn.Return<Deployment, StartError, Scope.Scope> {
  const server = yield* RedisServer.start({ flavor })
  const backend = yield* NodeRedisBackend.make({ url: server.url })
  return deployment("standalone", flavor, `${yield* version(server)}, one server`, backend, server.url)
})

/** A master with two replicas under three sentinels (the test kit's default shape). */
export const sentinel = Effect.fnUntraced(function* (
  flavor: ServerBinary.Flavor
): Effect.fn.Return<Deployment, StartError, Scope.Scope> {
  const topology = yield* SentinelTopology.start({ flavor, downAfterMillis })
  const backend = yield* NodeRedisBackend.makeSentinel({
    name: topology.masterName,
    sentinels: topology.sentinelNodes
  })
  const master = yield* topology.master()
  const description = `${yield* version(master)}, master + ${topology.nodes.length - 1} replicas, ${topology.sentinels.length} sentinels`
  const replicas = topology.nodes.length - 1
  return deployment("sentinel", flavor, description, backend, undefined, { url: master.url, replicas })
})

/** Three masters with one replica each. */
export const cluster = Effect.fnUntraced(function* (
  flavor: ServerBinary.Flavor
): Effect.fn.Return<Deployment, StartError, Scope.Scope> {
  const topology = yield* ClusterTopology.start({ flavor, nodeTimeoutMillis })
  const backend = yield* NodeRedisBackend.makeCluster({
    rootNodes: topology.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` }))
  })
  const [first] = topology.nodes
  const what = first === undefined ? flavor : yield* version(first)
  return deployment("cluster", flavor, `${what}, 3 masters with 1 replica each`, backend, undefined)
})
