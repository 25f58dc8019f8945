/**
 * Seeing and clearing locks from outside the programs that hold them: whether a lock is held, for
 * how much longer, its last fencing token and how many clients wait for it; every lock of a
 * namespace; and, as a last resort, forcing one free.
 *
 * Every function takes a node-redis client you connect (`createClient`, `createSentinel` or
 * `createCluster`): an operator's tool, not something a lock holder needs. Listing uses `SCAN`
 * (never `KEYS`), on every master of a Cluster.
 *
 * The key format these functions read is stable for 0.x: see `LockScripts.lockKey` and
 * `docs/admin.md`.
 *
 * @since 0.2.0
 */
import type * as Effect from "effect/Effect"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import * as Locks from "./internal/admin/locks.ts"
import { type Client, targetOf } from "./internal/admin/nodeRedisTarget.ts"
import type { ForceReleaseOptions } from "./internal/admin/target.ts"
import type { LockInfo } from "./internal/admin/locks.ts"

export type { ClusterClient, Client, SentinelClient, SingleNodeClient } from "./internal/admin/nodeRedisTarget.ts"
export type { ForceReleaseOptions } from "./internal/admin/target.ts"
export type { LockInfo } from "./internal/admin/locks.ts"

/**
 * What the server says about one lock, read atomically.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LockScripts } from "@sage/lock"
 * import { LockAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * const program = Effect.gen(function* () {
 *   const info = yield* LockAdmin.inspect(client, LockScripts.lockKey("billing", "invoice:42"))
 *   yield* Effect.log(info.held ? `held for ${info.remainingMillis} ms more` : "free")
 * })
 * ```
 *
 * @category inspection
 * @since 0.2.0
 */
export const inspect = (
  client: Client,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<LockInfo, LockRedisError | InvalidArgument> => Locks.inspect(targetOf(client), key, options)

/**
 * Every lock of a namespace that the servers know about (held, or free with its fencing token or
 * waiters still kept), found with `SCAN` on the node (or on every master of a Cluster), then
 * inspected. Locks that left nothing behind are not listed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LockAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * const held = LockAdmin.list(client, "billing").pipe(Effect.map((locks) => locks.filter((lock) => lock.held)))
 * ```
 *
 * @category inspection
 * @since 0.2.0
 */
export const list = (
  client: Client,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<LockInfo>, LockRedisError | InvalidArgument> =>
  Locks.list(targetOf(client), namespace, options)

/**
 * Deletes a lock's key whoever holds it. **Dangerous**: if the holder is alive, its body keeps
 * running until its next renewal finds the key gone (up to a third of its lease), while another
 * client may already hold the lock. Use it for a holder you know is dead and whose lease is too long
 * to wait out. The fence key stays, so the next holder's fencing token is still greater. Waiting
 * clients are not woken: they find the lock free at their next poll (within their backoff cap, one
 * second by default). Requires `{ force: true }`. Returns whether a lock was held.
 *
 * @example
 * ```ts
 * import { LockScripts } from "@sage/lock"
 * import { LockAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * const freed = LockAdmin.forceRelease(client, LockScripts.lockKey("billing", "invoice:42"), { force: true })
 * ```
 *
 * @category administration
 * @since 0.2.0
 */
export const forceRelease = (
  client: Client,
  key: string,
  options: ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> => Locks.forceRelease(targetOf(client), key, options)
