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
import * as Effect from "effect/Effect"
import { LockScripts } from "@sage/lock"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import { classify } from "./internal/connection/classify.ts"
import { type CommandClient, sendWithin } from "./internal/connection/commands.ts"
import { commandTimeout } from "./internal/options/commandTimeout.ts"
import { valueText } from "./internal/options/valueText.ts"
import { unexpected } from "./internal/replies.ts"

/**
 * A client that sends commands to the one node holding every key (a standalone `createClient`).
 *
 * @category models
 * @since 0.2.0
 */
export interface SingleNodeClient {
  sendCommand(args: Array<string>): Promise<unknown>
}

/**
 * What the admin functions need of a node-redis Sentinel client (`createSentinel`): its
 * `sendCommand` takes `isReadonly` first, and every command is sent as a write, so it goes to the
 * master, where the lock's keys are.
 *
 * @category models
 * @since 0.2.0
 */
export interface SentinelClient {
  getMasterNode(): unknown
  sendCommand(
    isReadonly: boolean | undefined,
    args: Array<string>,
    options?: { readonly timeout?: number }
  ): Promise<unknown>
}

/**
 * What the admin functions need of a node-redis Cluster client (`createCluster`).
 *
 * @category models
 * @since 0.2.0
 */
export interface ClusterClient {
  readonly masters: ReadonlyArray<unknown>
  nodeClient(node: never): unknown
  sendCommand(firstKey: string, isReadonly: boolean, args: Array<string>): Promise<unknown>
}

/**
 * Any client the admin functions accept.
 *
 * @category models
 * @since 0.2.0
 */
export type Client = SingleNodeClient | SentinelClient | ClusterClient

/**
 * What the server says about one lock.
 *
 * @category models
 * @since 0.2.0
 */
export interface LockInfo {
  /** The lock's Redis key (`<namespace>:{<key>}`). */
  readonly key: string
  /** Whether some client holds the lock now. */
  readonly held: boolean
  /** How long the current lease has left, in milliseconds, when held. */
  readonly remainingMillis: number | undefined
  /** The last fencing token issued for the lock (the holder's, when held), if the server still has it. */
  readonly lastFencingToken: number | undefined
  /** How many clients are registered as waiting for it (registrations that have lapsed are not counted). */
  readonly waiters: number
}

/** Options of `forceRelease`: the explicit acknowledgement that exclusion is being broken. */
export interface ForceReleaseOptions {
  /** Must be `true`: the holder may still be running its body when another client takes the lock. */
  readonly force: true
  /** Time limit of the command in milliseconds (default 2000). */
  readonly timeoutMillis?: number | undefined
}

const isCluster = (client: Client): client is ClusterClient => "masters" in client && "nodeClient" in client

const isSentinel = (client: Client): client is SentinelClient => "getMasterNode" in client

/** A Sentinel client seen as the one node it sends to (the master: every command is a write). */
const masterOf = (client: SentinelClient): CommandClient => ({
  sendCommand: (args, options) => client.sendCommand(false, args, options)
})

const send = (
  client: Client,
  routeKey: string,
  args: Array<string>,
  timeoutMillis: number
): Effect.Effect<unknown, LockRedisError> =>
  isCluster(client)
    ? Effect.tryPromise({
        try: () => client.sendCommand(routeKey, false, args),
        catch: (error) => classify(args[0] ?? "command", error)
      }).pipe(
        Effect.timeoutOrElse({
          duration: timeoutMillis,
          orElse: () => Effect.fail(classify(args[0] ?? "command", new Error(`no reply within ${timeoutMillis} ms`)))
        })
      )
    : sendWithin(isSentinel(client) ? masterOf(client) : client, args, timeoutMillis)

// One atomic read of a lock's keys (they share a hash tag, so one slot). Waiters are counted from
// when each registration lapses (KEYS[3], server ms): a waiter that died or stopped refreshing stays
// in the queue until the next script that purges it, but it no longer waits. Sent with `EVAL_RO`,
// which declares its keys read-only: a user whose keys are `%R~<namespace>:*` may run it (`EVAL`
// declares its keys read-write, so it would need write access to read).
const readScript = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call("PTTL", KEYS[1]), redis.call("GET", KEYS[2]), redis.call("ZCOUNT", KEYS[3], "(" .. string.format("%d", now), "+inf")}`

const infoOf = (key: string, reply: unknown): Effect.Effect<LockInfo, LockRedisError> => {
  if (!Array.isArray(reply) || typeof reply[0] !== "number" || typeof reply[2] !== "number") {
    return Effect.fail(unexpected("inspect", reply))
  }
  const [pttl, fence, waiters] = reply as [number, unknown, number]
  const token = typeof fence === "string" ? Number(fence) : Number.NaN
  return Effect.succeed({
    key,
    held: pttl !== -2,
    remainingMillis: pttl >= 0 ? pttl : undefined,
    lastFencingToken: Number.isSafeInteger(token) ? token : undefined,
    waiters
  })
}

const checkLockKey = (key: string): Effect.Effect<string, InvalidArgument> =>
  /^[^{}]+:\{[^{}]+\}$/.test(key)
    ? Effect.succeed(key)
    : Effect.fail(
        new InvalidArgument({
          field: "key",
          value: JSON.stringify(key),
          reason: "not a lock key: expected <namespace>:{<key>} (build it with LockScripts.lockKey)"
        })
      )

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
): Effect.Effect<LockInfo, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    const lockKey = yield* checkLockKey(key)
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const [, , waitingUntil] = LockScripts.keysOf(lockKey)
    const args = ["EVAL_RO", readScript, "3", lockKey, LockScripts.fenceKey(lockKey), waitingUntil]
    return yield* infoOf(lockKey, yield* send(client, lockKey, args, timeoutMillis))
  })

const globEscape = (text: string): string => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)

/** The lock key a key of `namespace` belongs to: itself, or the lock whose companion it is. */
const lockKeyOf = (namespace: string, key: string): string | undefined => {
  const prefix = `${namespace}:{`
  if (!key.startsWith(prefix)) return undefined
  const close = key.indexOf("}", prefix.length)
  return close > prefix.length ? key.slice(0, close + 1) : undefined
}

/** Every lock of `namespace` with a key on one node (the lock key or a companion), by SCAN. */
const scanNode = (
  node: CommandClient,
  namespace: string,
  timeoutMillis: number
): Effect.Effect<Array<string>, LockRedisError> =>
  Effect.gen(function* () {
    const found: Array<string> = []
    let cursor = "0"
    do {
      const reply = yield* sendWithin(
        node,
        ["SCAN", cursor, "MATCH", `${globEscape(namespace)}:{*`, "COUNT", "1000"],
        timeoutMillis
      )
      if (!Array.isArray(reply) || !Array.isArray(reply[1])) return yield* Effect.fail(unexpected("SCAN", reply))
      cursor = String(reply[0])
      for (const key of reply[1] as Array<unknown>) {
        const lock = typeof key === "string" ? lockKeyOf(namespace, key) : undefined
        if (lock !== undefined) found.push(lock)
      }
    } while (cursor !== "0")
    return found
  })

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
  Effect.gen(function* () {
    if (namespace.length === 0 || /[{}]/.test(namespace)) {
      return yield* Effect.fail(
        new InvalidArgument({
          field: "namespace",
          value: JSON.stringify(namespace),
          reason: "must be non-empty and contain no braces"
        })
      )
    }
    const timeoutMillis = yield* commandTimeout(options?.timeoutMillis, 2_000)
    const nodes: ReadonlyArray<CommandClient> = isCluster(client)
      ? yield* Effect.forEach(client.masters, (master) =>
          Effect.tryPromise({
            try: async () => (await client.nodeClient(master as never)) as SingleNodeClient,
            catch: (error) => classify("connect", error)
          })
        )
      : [isSentinel(client) ? masterOf(client) : client]
    const keys = (yield* Effect.forEach(nodes, (node) => scanNode(node, namespace, timeoutMillis))).flat()
    // SCAN may return a key twice, and a lock has several keys: each lock is inspected once, in order.
    const unique = [...new Set(keys)].sort()
    return yield* Effect.forEach(unique, (key) => inspect(client, key, { timeoutMillis }), { concurrency: 16 })
  })

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
): Effect.Effect<boolean, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    if ((options as { force?: unknown } | undefined)?.force !== true) {
      return yield* Effect.fail(
        new InvalidArgument({
          field: "force",
          value: valueText((options as { force?: unknown } | undefined)?.force),
          reason: "forcing a lock free breaks exclusion for its holder: pass { force: true } to confirm"
        })
      )
    }
    const lockKey = yield* checkLockKey(key)
    const timeoutMillis = yield* commandTimeout(options.timeoutMillis, 2_000)
    const reply = yield* send(client, lockKey, ["DEL", lockKey], timeoutMillis)
    return reply === 1
  })
