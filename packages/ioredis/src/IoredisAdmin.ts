/**
 * Seeing and clearing locks and semaphores from outside the programs that hold them, over an ioredis
 * client: the same functions, replies and errors as `LockAdmin` and `SemaphoreAdmin` of
 * `@sage/lock-node-redis` (see `docs/admin.md`), for operators whose tools hold an ioredis client.
 *
 * Every function takes a `Redis` (standalone, or made with `sentinels`: commands go to the master) or
 * a `Cluster` (each key's master; `listLocks` and `listSemaphores` run `SCAN` on every master). The
 * client is the caller's: it is used as it is, never closed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Redis } from "ioredis"
 * import { LockScripts } from "@sage/lock"
 * import { IoredisAdmin } from "@sage/lock-ioredis"
 *
 * const redis = new Redis(6379)
 * const program = Effect.gen(function* () {
 *   const held = (yield* IoredisAdmin.listLocks(redis, "billing")).filter((lock) => lock.held)
 *   yield* Effect.log(`${held.length} billing locks held`)
 *   const info = yield* IoredisAdmin.inspectSemaphore(redis, LockScripts.lockKey("semaphore", "gpu"))
 *   yield* Effect.log(`${info.used} of ${info.limit} permits in use`)
 * })
 * ```
 *
 * @since 0.2.1
 */
import type * as Effect from "effect/Effect"
import type { Cluster, Redis } from "ioredis"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import * as CommandAdmin from "@sage/lock-node-redis/CommandAdmin"
import { classify } from "./internal/classify.ts"
import { sendOn } from "./internal/send.ts"

export type {
  ForceReleaseOptions,
  LockInfo,
  SemaphoreHolder,
  SemaphoreInfo,
  SemaphoreWaiter
} from "@sage/lock-node-redis/CommandAdmin"

/**
 * The clients the functions take: a `Redis` or a `Cluster`.
 *
 * @category models
 * @since 0.2.1
 */
export type Client = Redis | Cluster

const isCluster = (client: Client): client is Cluster => "isCluster" in client && client.isCluster === true

/** The Cluster's masters, once it knows them (a client not connected yet connects on its first command). */
const mastersOf = async (cluster: Cluster): Promise<ReadonlyArray<CommandAdmin.Connection>> => {
  if (cluster.nodes("master").length === 0) await cluster.call("PING")
  const masters = cluster.nodes("master")
  if (masters.length === 0) throw new Error("the Cluster client knows no master")
  return masters.map((node) => ({ send: sendOn(node) }))
}

const targetOf = (client: Client): CommandAdmin.Target => ({
  send: sendOn(client),
  masters: isCluster(client) ? () => mastersOf(client) : undefined,
  sharded: isCluster(client),
  classify
})

/**
 * What the server says about one lock (`<namespace>:{<key>}`, see `LockScripts.lockKey`), read
 * atomically: held or not, the lease's remaining time, the last fencing token, the waiters.
 *
 * @category locks
 * @since 0.2.1
 */
export const inspectLock = (
  client: Client,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<CommandAdmin.LockInfo, LockRedisError | InvalidArgument> =>
  CommandAdmin.inspectLock(targetOf(client), key, options)

/**
 * Every lock of a namespace that the servers know about, found with `SCAN` (never `KEYS`).
 *
 * @category locks
 * @since 0.2.1
 */
export const listLocks = (
  client: Client,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<CommandAdmin.LockInfo>, LockRedisError | InvalidArgument> =>
  CommandAdmin.listLocks(targetOf(client), namespace, options)

/**
 * Deletes a lock's key whoever holds it. **Dangerous**: a live holder keeps running its body until
 * its next renewal finds the key gone, while another client may already hold the lock. Requires
 * `{ force: true }`; answers whether a lock was held.
 *
 * @category locks
 * @since 0.2.1
 */
export const forceReleaseLock = (
  client: Client,
  key: string,
  options: CommandAdmin.ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  CommandAdmin.forceReleaseLock(targetOf(client), key, options)

/**
 * A semaphore's (or read-write lock's) limit, permits in use, holders with their permits, fencing
 * tokens and remaining leases, and waiters in line, read atomically.
 *
 * @category semaphores
 * @since 0.2.1
 */
export const inspectSemaphore = (
  client: Client,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<CommandAdmin.SemaphoreInfo, LockRedisError | InvalidArgument> =>
  CommandAdmin.inspectSemaphore(targetOf(client), key, options)

/**
 * Every semaphore of a namespace in use (held, waited for, or keeping its limit), by `SCAN`.
 *
 * @category semaphores
 * @since 0.2.1
 */
export const listSemaphores = (
  client: Client,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<CommandAdmin.SemaphoreInfo>, LockRedisError | InvalidArgument> =>
  CommandAdmin.listSemaphores(targetOf(client), namespace, options)

/**
 * Releases one holder's permits (its `token`, from `inspectSemaphore`) whoever it is, and serves the
 * line. **Dangerous**: the holder's body may still be running. Requires `{ force: true }`; answers
 * whether the holder held permits.
 *
 * @category semaphores
 * @since 0.2.1
 */
export const forceReleaseSemaphore = (
  client: Client,
  key: string,
  token: string,
  options: CommandAdmin.ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  CommandAdmin.forceReleaseSemaphore(targetOf(client), key, token, options)
