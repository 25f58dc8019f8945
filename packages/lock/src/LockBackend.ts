/**
 * The port between the `Lock` service and a deployment.
 *
 * The lock logic (deadlines, retries, renewal, loss detection) lives in `@sage/lock`; a backend only
 * runs three atomic operations against one key and classifies failures into `RedisError`. Backends
 * for node-redis live in `@sage/lock-node-redis`; `MemoryBackend.layer` is an in-process backend
 * for single-process programs and tests.
 *
 * A backend does not retry: it reports each failure once, with `retryable` and `mayHaveExecuted`
 * set, and the lock decides what to do within its own budget.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { RedisError } from "./LockError.ts"

/**
 * What a backend is asked to do for one lock operation.
 *
 * @category models
 * @since 0.1.0
 */
export interface LeaseRequest {
  /** The full Redis key, already namespaced and hash-tagged. */
  readonly key: string
  /** The caller's random 128-bit token. */
  readonly token: string
  /** The lease to set, in milliseconds (acquire and renew). */
  readonly leaseMillis: number
  /**
   * How long the backend may spend on this operation, in milliseconds (always > 0). A backend passes
   * it on as its per-command timeout; the lock also enforces it.
   */
  readonly timeoutMillis: number
  /**
   * Whether replicated deployments must wait for replicas to acknowledge the write (`WAIT`).
   * Standalone backends ignore it.
   */
  readonly acknowledge: boolean
}

/**
 * The reply to an acquisition attempt.
 *
 * - `Acquired`: the key now holds the caller's token with a fresh lease. This is also the reply when
 *   the key already held the caller's token (a retry after a lost reply), so a lost reply never looks
 *   busy to its own retry.
 * - `Busy`: another token holds the key; `remainingMillis` is its remaining lease (-1 when it has no
 *   expiry), used to avoid polling long before it can expire.
 * - `NotMaster`: the write was applied, but the node that applied it (`address`) was not, or is no
 *   longer, the master in the client's view (replicated deployments). The lock cannot be relied on.
 *
 * @category models
 * @since 0.1.0
 */
export type AcquireReply =
  | { readonly _tag: "Acquired" }
  | { readonly _tag: "Busy"; readonly remainingMillis: number }
  | { readonly _tag: "NotMaster"; readonly address: string }

/**
 * The shape every backend provides.
 *
 * @category models
 * @since 0.1.0
 */
export interface Backend {
  /** A short description for logs and errors, e.g. `"node-redis standalone"`. */
  readonly description: string
  /** Set the key to the token with the lease when free or already ours. */
  readonly acquire: (request: LeaseRequest) => Effect.Effect<AcquireReply, RedisError>
  /** Extend the lease when the key still holds the token; `false` when it does not. */
  readonly renew: (request: LeaseRequest) => Effect.Effect<boolean, RedisError>
  /** Delete the key when it still holds the token; `false` when it did not. */
  readonly release: (request: LeaseRequest) => Effect.Effect<boolean, RedisError>
}

/**
 * The service key under which a deployment provides its backend.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const LockLive = Lock.layer().pipe(Layer.provide(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379" })))
 * ```
 *
 * @category services
 * @since 0.1.0
 */
export class LockBackend extends Context.Service<LockBackend, Backend>()("@sage/lock/LockBackend") {}
