// What the admin functions share (LockAdmin.ts, SemaphoreAdmin.ts): the clients they accept, sending
// one command to the node that owns a key, checking a key's format, finding a namespace's keys by
// SCAN, and the `{ force: true }` confirmation.
import * as Effect from "effect/Effect"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import { classify } from "./connection/classify.ts"
import { type CommandClient, sendWithin } from "./connection/commands.ts"
import { valueText } from "./options/valueText.ts"
import { unexpected } from "./replies.ts"

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

export const isCluster = (client: Client): client is ClusterClient => "masters" in client && "nodeClient" in client

export const isSentinel = (client: Client): client is SentinelClient => "getMasterNode" in client

/** A Sentinel client seen as the one node it sends to (the master: every command is a write). */
export const masterOf = (client: SentinelClient): CommandClient => ({
  sendCommand: (args, options) => client.sendCommand(false, args, options)
})

export const send = (
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

export const checkLockKey = (key: string): Effect.Effect<string, InvalidArgument> =>
  /^[^{}]+:\{[^{}]+\}$/.test(key)
    ? Effect.succeed(key)
    : Effect.fail(
        new InvalidArgument({
          field: "key",
          value: JSON.stringify(key),
          reason: "not a lock key: expected <namespace>:{<key>} (build it with LockScripts.lockKey)"
        })
      )

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
 * The keys of a namespace's locks (or semaphores) on the node, or on every master of a Cluster,
 * each once, in order: `SCAN` may return a key twice, and a lock has several keys.
 */
export const namespaceKeys = (
  client: Client,
  namespace: string,
  timeoutMillis: number
): Effect.Effect<ReadonlyArray<string>, LockRedisError | InvalidArgument> =>
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
    const nodes: ReadonlyArray<CommandClient> = isCluster(client)
      ? yield* Effect.forEach(client.masters, (master) =>
          Effect.tryPromise({
            try: async () => (await client.nodeClient(master as never)) as SingleNodeClient,
            catch: (error) => classify("connect", error)
          })
        )
      : [isSentinel(client) ? masterOf(client) : client]
    const keys = (yield* Effect.forEach(nodes, (node) => scanNode(node, namespace, timeoutMillis))).flat()
    return [...new Set(keys)].sort()
  })

/** `{ force: true }`, or `InvalidArgument`: forcing a holder out is never done by default. */
export const confirmForce = (options: unknown): Effect.Effect<void, InvalidArgument> =>
  (options as { force?: unknown } | undefined)?.force === true
    ? Effect.void
    : Effect.fail(
        new InvalidArgument({
          field: "force",
          value: valueText((options as { force?: unknown } | undefined)?.force),
          reason: "forcing a holder out breaks exclusion for it: pass { force: true } to confirm"
        })
      )

/**
 * Options of the `forceRelease` functions: the explicit acknowledgement that exclusion is being broken.
 *
 * @category models
 * @since 0.2.0
 */
export interface ForceReleaseOptions {
  /** Must be `true`: the holder may still be running its body when another client takes the lock. */
  readonly force: true
  /** Time limit of the command in milliseconds (default 2000). */
  readonly timeoutMillis?: number | undefined
}
