/**
 * Seeing and clearing semaphores and read-write locks from outside the programs that hold them: the
 * limit, the permits in use, each holder with its permits, fencing token and remaining lease, the
 * waiters in line; every semaphore of a namespace; and, as a last resort, releasing one holder.
 *
 * The functions take the same node-redis clients as `LockAdmin` (`createClient`, `createSentinel`,
 * `createCluster`), and the key format of `SemaphoreScripts`.
 *
 * @since 0.2.1
 */
import type * as Effect from "effect/Effect"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { type Client, targetOf } from "./internal/admin/nodeRedisTarget.ts"
import * as Semaphores from "./internal/admin/semaphores.ts"
import type { SemaphoreInfo } from "./internal/admin/semaphores.ts"
import type { ForceReleaseOptions } from "./internal/admin/target.ts"

export type { SemaphoreHolder, SemaphoreInfo, SemaphoreWaiter } from "./internal/admin/semaphores.ts"

/**
 * What the server says about one semaphore or read-write lock, read atomically: its limit, the
 * permits in use, each holder (permits, fencing token, remaining lease) and the waiters in line.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LockScripts, SemaphoreScripts } from "@sage/lock"
 * import { type LockAdmin, SemaphoreAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * const program = Effect.gen(function* () {
 *   const info = yield* SemaphoreAdmin.inspect(client, LockScripts.lockKey("partner-api", "orders"))
 *   yield* Effect.log(`${info.used} of ${info.limit ?? "?"} permits held, ${info.waiters.length} waiting`)
 * })
 * ```
 *
 * @category inspection
 * @since 0.2.1
 */
export const inspect = (
  client: Client,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<SemaphoreInfo, LockRedisError | InvalidArgument> => Semaphores.inspect(targetOf(client), key, options)

/**
 * Every semaphore of a namespace in use (held or waited for), found with `SCAN` as `LockAdmin.list`
 * finds locks. Locks are left out, and so are semaphores that have left only their fence key.
 *
 * @category inspection
 * @since 0.2.1
 */
export const list = (
  client: Client,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<SemaphoreInfo>, LockRedisError | InvalidArgument> =>
  Semaphores.list(targetOf(client), namespace, options)

/**
 * Releases one holder's permits whoever it is, and serves the semaphore's line with them, as the
 * holder's own release would. **Dangerous** in the same way as `LockAdmin.forceRelease`: a holder that is
 * still alive keeps running until its next renewal finds its permits gone, while the line may
 * already have been given them. Requires `{ force: true }`. Returns whether the holder held permits.
 *
 * @example
 * ```ts
 * import { LockScripts, SemaphoreScripts } from "@sage/lock"
 * import { type LockAdmin, SemaphoreAdmin } from "@sage/lock-node-redis"
 *
 * declare const client: LockAdmin.Client
 * declare const deadHolderToken: string // from SemaphoreAdmin.inspect
 * const freed = SemaphoreAdmin.forceRelease(client, LockScripts.lockKey("gpus", "pool"), deadHolderToken, {
 *   force: true
 * })
 * ```
 *
 * @category administration
 * @since 0.2.1
 */
export const forceRelease = (
  client: Client,
  key: string,
  token: string,
  options: ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  Semaphores.forceRelease(targetOf(client), key, token, options)
