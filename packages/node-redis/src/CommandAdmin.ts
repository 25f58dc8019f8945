/**
 * `LockAdmin` and `SemaphoreAdmin` over any Redis client: give the functions a `Target` (how to send
 * a command to the master of a key, and, on a Cluster, every master's connection) and they inspect,
 * list and force-release exactly as the node-redis ones do, with the same replies and errors.
 *
 * This module does not load node-redis: `@sage/lock-ioredis` builds `IoredisAdmin` on it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { LockScripts } from "@sage/lock"
 * import * as CommandAdmin from "@sage/lock-node-redis/CommandAdmin"
 *
 * // A client with one connection to a standalone server (or to the master of a Sentinel group).
 * declare const client: { call(command: string, ...args: Array<string>): Promise<unknown> }
 *
 * const target: CommandAdmin.Target = { send: ([command, ...args]) => client.call(command!, ...args) }
 * const program = Effect.gen(function* () {
 *   const info = yield* CommandAdmin.inspectLock(target, LockScripts.lockKey("billing", "invoice:42"))
 *   yield* Effect.log(info.held ? `held for ${info.remainingMillis} ms more` : "free")
 * })
 * ```
 *
 * @since 0.2.1
 */
import * as Effect from "effect/Effect"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { type Classify, classifyByShape, type Connection } from "./CommandBackend.ts"
import * as Locks from "./internal/admin/locks.ts"
import * as Semaphores from "./internal/admin/semaphores.ts"
import type { AdminTarget, ForceReleaseOptions, NodeSend } from "./internal/admin/target.ts"
import { sendWithin } from "./internal/connection/sending.ts"

export type { LockInfo } from "./internal/admin/locks.ts"
export type { SemaphoreHolder, SemaphoreInfo, SemaphoreWaiter } from "./internal/admin/semaphores.ts"
export type { ForceReleaseOptions } from "./internal/admin/target.ts"
export type { Connection } from "./CommandBackend.ts"

/**
 * A deployment as the admin functions reach it through some client.
 *
 * @category models
 * @since 0.2.1
 */
export interface Target {
  /**
   * Sends one command (its name first, then its arguments, all text) to the master that holds
   * `key`, and resolves with the reply as the client decodes it (as `CommandBackend.Connection`).
   * Every key of one lock or semaphore shares a hash tag, so `key` names the slot of them all; a
   * client of one node may ignore it.
   */
  readonly send: (args: ReadonlyArray<string>, key: string) => Promise<unknown>
  /**
   * Every master, each once (a Cluster's): where `listLocks` and `listSemaphores` run `SCAN`.
   * Default: the one node `send` reaches.
   */
  readonly masters?: (() => Promise<ReadonlyArray<Connection>>) | undefined
  /** A Cluster: a forced semaphore release wakes its waiters with `SPUBLISH`. Default `false`. */
  readonly sharded?: boolean | undefined
  /** Reads the client's failures. Default: `CommandBackend.classifyByShape`. */
  readonly classify?: Classify | undefined
}

const nodeOf =
  (connection: Connection, classify: Classify): NodeSend =>
  (args, timeoutMillis) =>
    sendWithin({ sendCommand: (command) => connection.send(command) }, args, timeoutMillis, classify)

const adminTarget = (target: Target): AdminTarget => {
  const classify = target.classify ?? classifyByShape
  const send = (key: string, args: Array<string>, timeoutMillis: number) =>
    sendWithin({ sendCommand: (command) => target.send(command, key) }, args, timeoutMillis, classify)
  const masters = target.masters
  return {
    send,
    masters:
      masters === undefined
        ? Effect.succeed([(args, timeoutMillis) => send("", args, timeoutMillis)])
        : Effect.tryPromise({
            try: () => masters(),
            catch: (error) => classify("connect", error)
          }).pipe(Effect.map((connections) => connections.map((connection) => nodeOf(connection, classify)))),
    sharded: target.sharded === true
  }
}

/**
 * `LockAdmin.inspect` over `target`: what the server says about one lock, read atomically.
 *
 * @category locks
 * @since 0.2.1
 */
export const inspectLock = (
  target: Target,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<Locks.LockInfo, LockRedisError | InvalidArgument> => Locks.inspect(adminTarget(target), key, options)

/**
 * `LockAdmin.list` over `target`: every lock of a namespace the servers know about.
 *
 * @category locks
 * @since 0.2.1
 */
export const listLocks = (
  target: Target,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<Locks.LockInfo>, LockRedisError | InvalidArgument> =>
  Locks.list(adminTarget(target), namespace, options)

/**
 * `LockAdmin.forceRelease` over `target`. **Dangerous**: deletes a lock's key whoever holds it
 * (requires `{ force: true }`); see `LockAdmin.forceRelease` for what that does to a live holder.
 *
 * @category locks
 * @since 0.2.1
 */
export const forceReleaseLock = (
  target: Target,
  key: string,
  options: ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> => Locks.forceRelease(adminTarget(target), key, options)

/**
 * `SemaphoreAdmin.inspect` over `target`: a semaphore's limit, holders and waiters, read atomically.
 *
 * @category semaphores
 * @since 0.2.1
 */
export const inspectSemaphore = (
  target: Target,
  key: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<Semaphores.SemaphoreInfo, LockRedisError | InvalidArgument> =>
  Semaphores.inspect(adminTarget(target), key, options)

/**
 * `SemaphoreAdmin.list` over `target`: every semaphore of a namespace in use.
 *
 * @category semaphores
 * @since 0.2.1
 */
export const listSemaphores = (
  target: Target,
  namespace: string,
  options?: { readonly timeoutMillis?: number | undefined }
): Effect.Effect<ReadonlyArray<Semaphores.SemaphoreInfo>, LockRedisError | InvalidArgument> =>
  Semaphores.list(adminTarget(target), namespace, options)

/**
 * `SemaphoreAdmin.forceRelease` over `target`. **Dangerous**: releases one holder's permits whoever it
 * is (requires `{ force: true }`), and serves the line.
 *
 * @category semaphores
 * @since 0.2.1
 */
export const forceReleaseSemaphore = (
  target: Target,
  key: string,
  token: string,
  options: ForceReleaseOptions
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  Semaphores.forceRelease(adminTarget(target), key, token, options)
