/**
 * A lock backend over Effect's own `Redis` service (`effect/persistence/Redis`), as provided by
 * `NodeRedis.layer` from `@effect/platform-node`: an Effect app that already has that layer adds
 * locks without a second connection for lock commands.
 *
 * **Details**
 * - Every lock operation is one script sent with the service's `send`, so it shares the app's
 *   connection, as the standalone `NodeRedisBackend` shares its own (acquire, renew, release: one
 *   script each; renewals of all held locks: one `renewAll` script per 500).
 * - Each command carries its own time limit (what is left of the caller's budget); the service's
 *   `send` has none, so a stalled server never stretches a deadline.
 * - Failures are classified as by the node-redis backends: Effect's `RedisError` (tag `"RedisError"`)
 *   becomes the lock's `LockRedisError` (tag `"LockRedisError"`) with the original as `cause`.
 * - Standalone servers only: `Redis` has no topology, so there is no `ROLE` or `WAIT` here. For
 *   Sentinel or Cluster use `NodeRedisBackend.layerFromSentinel` / `layerFromCluster`.
 *
 * It does not import `@effect/platform-node`: any layer that provides `Redis` works. The failure
 * classification reads node-redis's error types, so it is exact for `NodeRedis`; another
 * implementation's error replies are treated as permanent failures.
 *
 * @since 0.2.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redis from "effect/persistence/Redis"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Exit from "effect/Exit"
import { LockBackend } from "@sage/lock"
import { InvalidArgument } from "@sage/lock/LockError"
import { classify } from "./internal/connection/classify.ts"
import type { SharedClient } from "./internal/connection/clients.ts"
import { noReply, type Send } from "./internal/connection/commands.ts"
import { valueText } from "./internal/options/valueText.ts"
import * as Standalone from "./internal/standalone/backend.ts"
import { backendOver } from "./internal/standalone/commandBackend.ts"
import type { Subscriber } from "./internal/wakeups/subscriber.ts"

/**
 * Options of the backend over Effect's `Redis` service.
 *
 * @category options
 * @since 0.2.0
 */
export interface Options {
  /**
   * Whether releases wake waiting callers in other processes through pub/sub. Default `false`:
   * waiters poll with backoff (up to a few hundred milliseconds late), and the lock opens no
   * connection at all.
   *
   * **Details**
   * With `true` and `NodeRedis.layer`, the lock opens one subscriber connection of its own (a
   * duplicate of the `NodeRedis` client, found by that service's key, so this module does not
   * import `@effect/platform-node`) the first time a lock is waited for, and closes it with the
   * layer.
   *
   * **Gotchas**
   * With another `Redis` implementation it falls back to `Redis.subscribe`, which opens one
   * connection per channel (as `NodeRedis` implements it); each lock key waited for has its own
   * channel, so every key being waited for then costs one connection, closed a minute after its
   * last wait. When the context holds a `NodeRedis` service, its client is taken to be the one
   * behind `Redis` (as `NodeRedis.layer` provides both).
   */
  readonly wakeups?: boolean | undefined
}

/** One command through the service, within `timeoutMillis`, its failure classified. */
const sendVia =
  (redis: Redis.Redis["Service"]): Send =>
  (args, timeoutMillis) => {
    const command = args[0] ?? "command"
    const millis = Math.max(1, Math.ceil(timeoutMillis))
    return redis.send(command, ...args.slice(1)).pipe(
      Effect.mapError((error) => classify(command, error.cause)),
      Effect.timeoutOrElse({ duration: millis, orElse: () => Effect.fail(noReply(command, millis)) })
    )
  }

/**
 * Wake-up channels over `Redis.subscribe`: each channel lives in a child of the backend's scope,
 * so unsubscribing closes its subscription and closing the backend closes them all.
 */
const subscriberVia = (redis: Redis.Redis["Service"]): Effect.Effect<() => Promise<Subscriber>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const run = Effect.runPromiseWith(yield* Effect.context<never>())
    const open = new Map<string, Scope.Closeable>()
    const subscriber: Subscriber = {
      subscribe: (channel, listener) =>
        run(
          Effect.gen(function* () {
            const child = yield* Scope.fork(scope)
            open.set(channel, child)
            const queue = yield* Scope.provide(redis.subscribe(channel), child)
            // A failed subscription ends the loop; the waiters keep their own retry schedule.
            yield* Effect.forkIn(
              Effect.forever(Effect.flatMap(Queue.take(queue), ({ message }) => Effect.sync(() => listener(message)))),
              child
            )
          })
        ),
      unsubscribe: (channel) => {
        const child = open.get(channel)
        open.delete(channel)
        return child === undefined ? Promise.resolve() : run(Scope.close(child, Exit.void))
      }
    }
    return () => Promise.resolve(subscriber)
  })

/**
 * `@effect/platform-node`'s `NodeRedis` service (its raw node-redis client), looked up by its
 * public key so that this module needs nothing from that package.
 */
class NodeRedisClient extends Context.Service<NodeRedisClient, { readonly client: Pick<SharedClient, "duplicate"> }>()(
  "@effect/platform-node/NodeRedis"
) {}

/**
 * The backend over the `Redis` service in context; what it opens closes with the scope, and the
 * service's own connection is never closed by the lock.
 *
 * @category constructors
 * @since 0.2.0
 */
export const make = (
  options: Options = {}
): Effect.Effect<LockBackend.Backend, InvalidArgument, Redis.Redis | Scope.Scope> =>
  Effect.gen(function* () {
    if (typeof options !== "object" || options === null || Array.isArray(options)) {
      return yield* new InvalidArgument({
        field: "options",
        value: valueText(options),
        reason: "must be an options object"
      })
    }
    const wakeups: unknown = options.wakeups
    if (wakeups !== undefined && typeof wakeups !== "boolean") {
      return yield* new InvalidArgument({ field: "wakeups", value: valueText(wakeups), reason: "must be a boolean" })
    }
    const redis = yield* Redis.Redis
    const nodeRedis = yield* Effect.serviceOption(NodeRedisClient)
    const subscriber =
      options.wakeups !== true
        ? undefined
        : Option.isSome(nodeRedis)
          ? yield* Standalone.duplicateSubscriber(nodeRedis.value.client)
          : yield* subscriberVia(redis)
    return yield* backendOver({
      description: "effect redis (shared connection)",
      sends: [sendVia(redis)],
      subscriber,
      classify
    })
  })

/**
 * The `LockBackend` over the app's `Redis` service, e.g. from `NodeRedis.layer`: lock commands use
 * its connection, so the app needs no second connection for locks.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { NodeRedis } from "@effect/platform-node"
 * import { Lock } from "@sage/lock"
 * import { EffectRedisBackend } from "@sage/lock-node-redis"
 *
 * const RedisLive = NodeRedis.layer({ url: "redis://127.0.0.1:6379" })
 * const LockLive = Lock.layer({ namespace: "billing" }).pipe(
 *   Layer.provide(EffectRedisBackend.layer()),
 *   Layer.provide(RedisLive)
 * )
 *
 * const program = Lock.withLock("invoice-42", { waitTimeout: "5 seconds" })(Effect.log("one at a time")).pipe(
 *   Effect.catchTag("LockRedisError", (e) => Effect.logError(`lock: ${e.code}`)),
 *   Effect.provide(LockLive)
 * )
 * ```
 *
 * @category layers
 * @since 0.2.0
 */
export const layer = (options?: Options): Layer.Layer<LockBackend.LockBackend, InvalidArgument, Redis.Redis> =>
  Layer.effect(LockBackend.LockBackend, make(options))
