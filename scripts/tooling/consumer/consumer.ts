// What a TypeScript user writes against the published typings: layers, the accessors, a typed key
// client, error matching and deep imports. Type-checked (not run) under NodeNext and under Bundler.
import { Config, Effect, Layer, Option } from "effect"
import { KeyCodec, Lock, LockError, MemoryBackend } from "@sage/lock"
import type { LockBackend } from "@sage/lock/LockBackend"
import * as LockModule from "@sage/lock/Lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"

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

export const programs = [
  guarded.pipe(Effect.provide(LockLive)),
  maybe.pipe(Effect.provide(FromEnv)),
  jobs.pipe(Effect.provide(backendOnly))
] as const
