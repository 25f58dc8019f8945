// What a TypeScript user writes against the published typings: layers, the accessors, a typed key
// client, error matching and deep imports. Type-checked (not run) under NodeNext and under Bundler.
import { Config, Effect, Layer, Option } from "effect"
import { Election, KeyCodec, Lease, Lock, LockError, MemoryBackend, PromiseClient, Semaphore } from "@sage/lock"
import type { Handle } from "@sage/lock/Lease"
import type { LockBackend } from "@sage/lock/LockBackend"
import * as LockBackendTag from "@sage/lock/LockBackend"
import * as LockModule from "@sage/lock/Lock"
import { FencedWrite, NodeRedisBackend } from "@sage/lock-node-redis"
import * as CommandBackend from "@sage/lock-node-redis/CommandBackend"
import { IoredisAdmin, IoredisBackend, IoredisFencedWrite } from "@sage/lock-ioredis"
import { Cluster, Redis } from "ioredis"

const LockLive: Layer.Layer<Lock.Lock, LockError.InvalidArgument | LockError.LockRedisError> = Lock.layer({
  leaseDuration: "10 seconds",
  namespace: "consumer"
}).pipe(Layer.provide(NodeRedisBackend.layer({ url: "rediss://127.0.0.1:6380", socket: { tls: true } })))

const FromEnv = Lock.layerConfig({
  namespace: Config.String("LOCK_NAMESPACE").pipe(Config.withDefault("lock"))
}).pipe(Layer.provide(NodeRedisBackend.layerConfig({ url: Config.String("REDIS_URL") })))

const backendOnly: Layer.Layer<LockBackend> = MemoryBackend.layer

const guarded: Effect.Effect<
  string,
  LockError.InvalidArgument | LockError.LockRedisError | LockError.LockLost,
  Lock.Lock
> = Effect.succeed("done").pipe(
  Lock.withLock("account:42", { waitTimeout: "2 seconds" }),
  Effect.catchTag("TimedOut", (e) => Effect.succeed(`busy after ${e.waitedMillis} ms`))
)

const maybe: Effect.Effect<Option.Option<number>, unknown, Lock.Lock> = Effect.succeed(1).pipe(
  LockModule.tryWithLock("cron")
)

const jobs = Effect.gen(function* () {
  const client = yield* Lock.make({ namespace: "jobs", keyCodec: KeyCodec.integer })
  return yield* client.withLock(7, { waitTimeout: "1 second" })(Effect.succeed(7))
})

// The lease in the body (its requirement is removed), a scoped acquire, and a fenced write.
const fencing: Effect.Effect<number, LockError.LockError, Lock.Lock> = Lease.fencingToken.pipe(
  Lock.withLock("account:42", { waitTimeout: "2 seconds" })
)
const leader: Effect.Effect<number, LockError.LockError, Lock.Lock> = Effect.scoped(
  Effect.map(Lock.acquire("leader", { waitTimeout: "1 second" }), (lease: Handle) => lease.fencingToken)
)
declare const redis: FencedWrite.Client
const fencedWrite: Effect.Effect<FencedWrite.SetResult, LockError.LockRedisError | LockError.InvalidArgument> =
  FencedWrite.set(redis, {
    key: "{account:42}:balance",
    value: "110",
    fencingToken: 1
  })
export const fencingPrograms = [fencing, leader, fencedWrite] as const

export const programs = [
  guarded.pipe(Effect.provide(LockLive)),
  maybe.pipe(Effect.provide(FromEnv)),
  jobs.pipe(Effect.provide(backendOnly))
] as const

// Semaphores, elections and the Promise API, as typed users write them.
const partner: Effect.Effect<string, LockError.LockError, Semaphore.Semaphore> = Semaphore.withPermits("partner-api", {
  limit: 4,
  waitTimeout: "10 seconds"
})(Effect.succeed("called"))
const scheduler: Effect.Effect<never, LockError.InvalidArgument | LockError.LockRedisError, Election.Election> =
  Election.run("scheduler", (leadership) => Effect.log(`term ${leadership.term}`))
export const morePrograms = [partner, scheduler] as const

const locks: PromiseClient.PromiseClient = PromiseClient.make(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379" }))
export const viaPromises = async (): Promise<number> => {
  const token: number = await locks.using("invoice:42", { waitTimeout: 5_000 }, async (signal: AbortSignal, lease) => {
    if (signal.aborted) throw new Error("lost")
    return lease.fencingToken
  })
  const held: PromiseClient.Held = await locks.acquire("export", { waitTimeout: "1 minute" })
  await held.release()
  const leader: Election.Leader | undefined = await locks.leader("scheduler")
  await locks.close()
  return token + (leader?.term ?? 0)
}

// ioredis: a backend of its own connections, one over the application's client (a Redis or a
// Cluster), and any other client through CommandBackend.
const OverIoredis: Layer.Layer<LockBackend, LockError.InvalidArgument | LockError.LockRedisError> =
  IoredisBackend.layer({ host: "127.0.0.1", port: 6379, connections: 2 })
const application = new Redis("redis://127.0.0.1:6379")
const OverApplicationClient: Layer.Layer<LockBackend, LockError.InvalidArgument | LockError.LockRedisError> =
  IoredisBackend.layerFromClient(application)
declare const anyClient: { send(args: ReadonlyArray<string>): Promise<unknown> }
const OverAnyClient: Layer.Layer<LockBackend, LockError.InvalidArgument> = Layer.effect(
  LockBackendTag.LockBackend,
  CommandBackend.make({ description: "any client", connections: [anyClient] })
)
const OverIoredisSentinel: Layer.Layer<LockBackend, LockError.InvalidArgument | LockError.LockRedisError> =
  IoredisBackend.layer({ sentinels: [{ host: "127.0.0.1", port: 26379 }], name: "mymaster", sentinelPassword: "pw" })
const OverIoredisCluster: Layer.Layer<LockBackend, LockError.InvalidArgument | LockError.LockRedisError> =
  IoredisBackend.layerCluster([{ host: "127.0.0.1", port: 7000 }], {
    maxConnections: 4,
    redisOptions: { password: "pw" }
  })
const OverApplicationCluster: Layer.Layer<LockBackend, LockError.InvalidArgument | LockError.LockRedisError> =
  IoredisBackend.layerFromClient(new Cluster([{ host: "127.0.0.1", port: 7000 }], { lazyConnect: true }))
const ioLocks: PromiseClient.PromiseClient = PromiseClient.make(OverIoredis)
const fencedOverIoredis: Effect.Effect<
  IoredisFencedWrite.SetResult,
  LockError.LockRedisError | LockError.InvalidArgument
> = IoredisFencedWrite.set(application, { key: "{job}:state", value: "done", fencingToken: 42 })
const heldOverIoredis: Effect.Effect<
  ReadonlyArray<IoredisAdmin.LockInfo>,
  LockError.LockRedisError | LockError.InvalidArgument
> = IoredisAdmin.listLocks(new Cluster([{ host: "127.0.0.1", port: 7000 }], { lazyConnect: true }), "billing")
const permitsOverIoredis: Effect.Effect<number, LockError.LockRedisError | LockError.InvalidArgument> =
  IoredisAdmin.inspectSemaphore(application, "semaphore:{gpu}").pipe(Effect.map((info) => info.used))
export const overIoredis = [
  OverApplicationClient,
  OverIoredisSentinel,
  OverIoredisCluster,
  OverApplicationCluster,
  OverAnyClient,
  ioLocks,
  fencedOverIoredis,
  heldOverIoredis,
  permitsOverIoredis
] as const
