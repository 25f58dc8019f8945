/**
 * The port between the `Lock` service and a deployment.
 *
 * The lock logic (deadlines, retries, renewal, loss detection) lives in `@sage/lock`; a backend only
 * runs atomic operations against one lock (acquire, renew, release, check) and classifies failures
 * into `LockRedisError`. Backends
 * for node-redis live in `@sage/lock-node-redis`; `MemoryBackend.layer` is an in-process backend
 * for single-process programs and tests.
 *
 * A backend does not retry: it reports each failure once, with `retryable` and `mayHaveExecuted`
 * set, and the lock decides what to do within its own budget. A backend also keeps its own time
 * limits: every operation completes (with a retryable `LockRedisError` of kind `"timeout"` when it must)
 * within the request's `timeoutMillis`. The lock does not wrap each call in a timer of its own, so a
 * backend that ignores the limit stretches the caller's deadline.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { InvalidArgument, LockRedisError } from "./LockError.ts"

/**
 * What a backend is asked to do for one lock operation.
 *
 * @category models
 * @since 0.1.0
 */
export interface LeaseRequest {
  /** The full Redis key, already namespaced and hash-tagged. */
  readonly key: string
  /** The caller's token: no other call or waiter, of any process, has the same. */
  readonly token: string
  /** The lease to set, in milliseconds (acquire and renew). */
  readonly leaseMillis: number
  /**
   * How long the backend may spend on this operation, in milliseconds (always > 0). The backend must
   * complete within it, failing with a retryable timeout `LockRedisError` when the server does not answer.
   */
  readonly timeoutMillis: number
  /**
   * Whether replicated deployments must wait for replicas to acknowledge the write (`WAIT`).
   * Standalone backends ignore it.
   */
  readonly acknowledge: boolean
  /**
   * Acquire only: the caller's waiter id when it will wait for a busy lock (`withLock` over a backend
   * with `wakeups`). A busy reply then also registers the waiter at the server, in arrival order, so
   * that a release wakes the longest-waiting one and a free lock is granted to it first.
   */
  readonly waiter?: { readonly id: string; readonly ttlMillis: number } | undefined
  /**
   * Release only: the fencing token the lease was granted with (the lock sends it with every release
   * of a lease it holds). A key that is gone while no grant has issued a fencing token for it since
   * this one was deleted by an earlier attempt of the same release, expired, or was deleted, with
   * nobody taking it in between: the release answers `"gone"` (see `ReleaseReply`). A backend that
   * ignores the field answers `false` there, and the lock reports a loss it cannot rule out.
   *
   * @since 0.2.0
   */
  readonly fence?: number | undefined
  /**
   * Set when the key is a semaphore's: the request is for `count` of its `limit` permits, and runs
   * the semaphore's scripts (`SemaphoreScripts`) instead of the lock's. Absent for a lock.
   *
   * @since 0.2.1
   */
  readonly permits?: Permits | undefined
}

/**
 * How many permits of a semaphore a request is for, and the semaphore's limit.
 *
 * @category models
 * @since 0.2.1
 */
export interface Permits {
  readonly count: number
  readonly limit: number
}

/**
 * Cross-process wake-up: a release tells the longest-waiting registered waiter that the lock is
 * free, so it does not sleep through it. Messages may be lost (a reconnect, a failover): waiters
 * still retry on their own schedule, so a lost message only costs that retry delay.
 *
 * @category models
 * @since 0.2.0
 */
export interface Wakeups {
  /**
   * Waits until a release names `waiterId` on `key`, or `millis` pass (`false`). `true` when woken
   * (or when the subscription was only just made, so a message may have been missed: try again at
   * once). `Granted` when the release handed the lock to the waiter (only for a `grants` backend and
   * a waiter id made with `LockScripts.grantingWaiterPrefix`). `Next` when the waiter ahead was
   * served: the caller waits out its claim window, then tries.
   *
   * **Details**
   * A wake-up channel the server refuses for good (`NOPERM`: the user may not subscribe) fails the
   * wait with that `LockRedisError`, which the lock reports at once. A temporary failure (no
   * connection) waits out `millis` and answers `false`, so the waiter falls back to polling at its
   * usual pace, never faster.
   */
  readonly await: (
    key: string,
    waiterId: string,
    millis: number
  ) => Effect.Effect<boolean | Granted | Next, LockRedisError>
  /**
   * Withdraws a waiter that gives up (timed out, interrupted), and wakes the next one if the lock is
   * free. Best effort within `timeoutMillis`; registrations also lapse on their own.
   */
  readonly leave: (
    key: string,
    waiterId: string,
    timeoutMillis: number,
    permits?: Permits | undefined
  ) => Effect.Effect<void>
  /**
   * Whether a release may hand the lock straight to a waiter whose id begins with
   * `LockScripts.grantingWaiterPrefix` (see `Granted`). Only for deployments where a release's
   * write is as durable as an acquisition's (standalone): a backend that waits for replicas to
   * acknowledge an acquisition must leave this unset.
   *
   * @since 0.2.0
   */
  readonly grants?: boolean | undefined
}

/**
 * The waiter ahead in line was just served (handed the lock, or woken to take it): if it never takes
 * it (its process died since), the lock is this waiter's to take when the claim window ends,
 * `claimMillis` after the message was sent. Messages can be lost; this one only shortens a wait.
 *
 * @category models
 * @since 0.2.0
 */
export interface Next {
  readonly _tag: "Next"
  readonly claimMillis: number
}

/**
 * A release handed the lock to the waiter: the key holds `token` (`LockScripts.grantToken`) with
 * `fence`, for `leaseMillis` from when the release ran. The release ran after the waiter's last
 * busy attempt reached the server, and the grant is new only if `fence` is above that attempt's
 * `fenceFloor`: the lock checks both before it relies on the grant, then renews it to its own lease.
 *
 * @category models
 * @since 0.2.0
 */
export interface Granted {
  readonly _tag: "Granted"
  readonly token: string
  readonly fence: number
  readonly leaseMillis: number
}
/**
 * The reply to an acquisition attempt.
 *
 * - `Acquired`: the key now holds the caller's token with a fresh lease. This is also the reply when
 *   the key already held the caller's token (a retry after a lost reply), so a lost reply never looks
 *   busy to its own retry. `fence` is the grant's fencing token: a positive integer (below 2^53)
 *   greater than every token issued for the key before (see `docs/fencing.md` for the limits); a
 *   retry that finds its own grant gets that grant's token back.
 * - `Busy`: another token holds the key; `remainingMillis` is its remaining lease (-1 when it has no
 *   expiry), used to avoid polling long before it can expire; -2 when the key is free but reserved
 *   for a waiter that registered earlier (it gets the lock first). When the attempt registered a
 *   waiter, `fenceFloor` is the highest fencing token issued before it (see `Granted`).
 * - `NotMaster`: the write was applied, but the node that applied it (`address`) was not, or is no
 *   longer, the master in the client's view (replicated deployments). The lock cannot be relied on.
 * - `LimitConflict` (semaphores only): the semaphore is in use with another limit, `limit`; nothing
 *   changed.
 *
 * @category models
 * @since 0.1.0
 */
export type AcquireReply =
  | { readonly _tag: "Acquired"; readonly fence: number }
  | { readonly _tag: "Busy"; readonly remainingMillis: number; readonly fenceFloor?: number | undefined }
  | { readonly _tag: "NotMaster"; readonly address: string }
  | { readonly _tag: "LimitConflict"; readonly limit: number }

/**
 * The reply for one lease of a batched renewal: `true` renewed, `false` the key no longer holds the
 * token (ownership lost), or the failure that lease met.
 *
 * @category models
 * @since 0.2.0
 */
export type RenewReply = boolean | LockRedisError

/**
 * What a backend is asked to do to hand a held lock to another caller of the same client: the
 * holder's `token` is replaced by `successorToken`, with a fresh lease of `leaseMillis`, and
 * `waiter` (the client's waiter id), if given, leaves the server's waiter queue as a grant would
 * make it. `acknowledge` is as for an acquisition.
 *
 * @category models
 * @since 0.2.0
 */
export interface TransferRequest extends LeaseRequest {
  /** The successor's random 128-bit token, which the key holds after the transfer. */
  readonly successorToken: string
}

/**
 * The reply to a transfer.
 *
 * - `Transferred`: the key now holds the successor's token with a fresh lease (also the reply to a
 *   retry that finds the transfer already made, which re-arms the lease). `fence` is the new grant's
 *   fencing token, as for an acquisition. `othersWaiting` is true when other clients are
 *   registered as waiting for the key (always false for a backend without a waiter queue).
 * - `NotOwner`: the key was gone or held another token; nothing changed.
 *
 * @category models
 * @since 0.2.0
 */
export type TransferReply =
  | { readonly _tag: "Transferred"; readonly fence: number; readonly othersWaiting: boolean }
  | { readonly _tag: "NotOwner" }

/**
 * What a release found: `true` the key held the token and was deleted; `false` it was gone or held
 * another token; `"gone"` it was gone and no lock had been granted on it since the request's `fence`
 * (so nobody else held it in between). A backend that does not keep fences answers `true` or `false`
 * only.
 *
 * @example
 * ```ts
 * import type { LockBackend } from "@sage/lock"
 *
 * // Whether the lock is free of this caller's lease: deleted now, or already gone.
 * const freed = (reply: LockBackend.ReleaseReply): boolean => reply !== false
 * ```
 *
 * @category models
 * @since 0.2.0
 */
export type ReleaseReply = boolean | "gone"

/**
 * What an election's leader last proclaimed (see `Elections`).
 *
 * @category models
 * @since 0.2.1
 */
export interface LeaderRecord {
  /** The leader's term: the fencing token of its grant. */
  readonly term: number
  /** The id the leader campaigned with. */
  readonly candidate: string
  /** What it proclaimed last. */
  readonly value: string
  /** When the term was first proclaimed, in milliseconds since the epoch on the server's clock. */
  readonly since: number
  /** 1 for the term's first proclamation, one more for each after it. */
  readonly revision: number
}

/**
 * Who leads an election, as read from the deployment.
 *
 * - `Leading`: the lock is held, and its term proclaimed `record`.
 * - `Vacant`: nobody holds the lock.
 * - `Unproclaimed`: the lock is held by `term` (0 when unknown), which has not proclaimed yet.
 *
 * @category models
 * @since 0.2.1
 */
export type ElectionView =
  | { readonly _tag: "Leading"; readonly record: LeaderRecord }
  | { readonly _tag: "Vacant" }
  | { readonly _tag: "Unproclaimed"; readonly term: number }

/**
 * A proclamation: `value` for the election whose lock key is `key`, as `candidate`, in `term`.
 *
 * @category models
 * @since 0.2.1
 */
export interface ProclaimRequest {
  readonly key: string
  readonly term: number
  readonly candidate: string
  readonly value: string
  /** As for `LeaseRequest`. */
  readonly timeoutMillis: number
  /** As for `LeaseRequest`: wait for replicas to acknowledge the record. */
  readonly acknowledge: boolean
}

/**
 * What elections need of a backend beyond the lock: a leader record written only while its term
 * leads, read back, and a word to the observers (`ElectionScripts`). Observers wait for that word
 * with `Wakeups.await(key, ElectionScripts.observerId, millis)`.
 *
 * @category models
 * @since 0.2.1
 */
export interface Elections {
  /** Writes the record and tells observers, if `term` still leads: `false` when it does not. */
  readonly proclaim: (request: ProclaimRequest) => Effect.Effect<boolean, LockRedisError>
  /** Who leads, read on the key's master. */
  readonly read: (key: string, timeoutMillis: number) => Effect.Effect<ElectionView, LockRedisError>
  /** Tells observers to read again. Best effort within `timeoutMillis`. */
  readonly announce: (key: string, timeoutMillis: number) => Effect.Effect<void>
}

/**
 * The shape every backend provides.
 *
 * @category models
 * @since 0.1.0
 */
export interface Backend {
  /** A short description for logs and errors, e.g. `"node-redis standalone"`. */
  readonly description: string
  /**
   * Set by a backend whose layer returns before its connections are up: completes with the
   * connected backend, which callers then use in its place, or fails with why it cannot connect.
   * `Lock.make` checks its own options first and then waits for it, so a bad lock option is
   * reported at once whatever the server does, and a server that cannot be reached still fails the
   * lock's layer. Until then this backend's operations wait for the connection within their own
   * `timeoutMillis`.
   *
   * @since 0.2.0
   */
  readonly connected?: Effect.Effect<Backend, LockRedisError | InvalidArgument> | undefined
  /** Set the key to the token with the lease when free or already ours. */
  readonly acquire: (request: LeaseRequest) => Effect.Effect<AcquireReply, LockRedisError>
  /** Extend the lease when the key still holds the token; `false` when it does not. */
  readonly renew: (request: LeaseRequest) => Effect.Effect<boolean, LockRedisError>
  /** Delete the key when it still holds the token (see `ReleaseReply`). */
  readonly release: (request: LeaseRequest) => Effect.Effect<ReleaseReply, LockRedisError>
  /**
   * Asks the deployment whether the key still holds the token (on the key's master, which replicated
   * deployments confirm with `ROLE`), changing nothing: `true` held, `false` gone or another owner's.
   * Only `key`, `token` and `timeoutMillis` of the request are used.
   *
   * @since 0.2.0
   */
  readonly check: (request: LeaseRequest) => Effect.Effect<boolean, LockRedisError>
  /**
   * Renews many leases in as few round trips as the deployment allows (one per node), with one
   * replica acknowledgement per node when asked. The replies are in the order of the requests; a
   * failure that hits the whole batch is repeated for every lease in it. It never fails as a whole.
   * The requests share one `timeoutMillis` and `acknowledge`. Optional: without it, the lock sends
   * one `renew` per lease, concurrently.
   */
  readonly renewAll?: ((requests: ReadonlyArray<LeaseRequest>) => Effect.Effect<ReadonlyArray<RenewReply>>) | undefined
  /**
   * Hands a held lock to another caller of the same client in one atomic step: the key never
   * becomes free in between, so the next fiber of a client starts one round trip after the body
   * instead of a release and an acquisition later. Must be idempotent for the same request (a retry
   * after a lost reply gets the same fence). Optional: without it, the lock releases and the next
   * fiber acquires.
   *
   * @since 0.2.0
   */
  readonly transfer?: ((request: TransferRequest) => Effect.Effect<TransferReply, LockRedisError>) | undefined
  /**
   * The leader records of elections. Optional: `Election.make` refuses a backend without them.
   *
   * @since 0.2.1
   */
  readonly elections?: Elections | undefined
  /** Cross-process wake-up on release. Optional: without it, waiters poll with backoff. */
  readonly wakeups?: Wakeups | undefined
  /**
   * Withdraws a waiter from a key's line, as `Wakeups.leave` does, for a backend without wake-ups
   * whose waiters still register: a semaphore's callers keep their place in line while they poll.
   *
   * @since 0.2.1
   */
  readonly leave?: Wakeups["leave"] | undefined
  /**
   * Whether the backend's requests reach the server in the order they are made (one pipelined
   * connection, or in memory). Then the next fiber of the same client waiting for a key sends its
   * acquisition right behind the release, without waiting for the release's reply: one round trip
   * per in-process handoff instead of two. Optional: without it, the next fiber starts only after
   * the release has answered.
   *
   * @since 0.2.0
   */
  readonly ordered?: boolean | undefined
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
