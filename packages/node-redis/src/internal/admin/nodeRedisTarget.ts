// The admin functions' view of a node-redis client (`createClient`, `createSentinel`,
// `createCluster`): LockAdmin.ts and SemaphoreAdmin.ts accept these clients and turn them into an
// `AdminTarget`, with node-redis's failures read by classify.ts.
import * as Effect from "effect/Effect"
import type { LockRedisError } from "@sage/lock/LockError"
import { classify } from "../connection/classify.ts"
import { type CommandClient, sendWithin } from "../connection/commands.ts"
import type { AdminTarget, NodeSend } from "./target.ts"

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

const isCluster = (client: Client): client is ClusterClient => "masters" in client && "nodeClient" in client

const isSentinel = (client: Client): client is SentinelClient => "getMasterNode" in client

/** A Sentinel client seen as the one node it sends to (the master: every command is a write). */
const masterOf = (client: SentinelClient): CommandClient => ({
  sendCommand: (args, options) => client.sendCommand(false, args, options)
})

const nodeSend =
  (node: CommandClient): NodeSend =>
  (args, timeoutMillis) =>
    sendWithin(node, args, timeoutMillis)

/** `client` as the admin functions see it. */
export const targetOf = (client: Client): AdminTarget => {
  if (isCluster(client)) {
    return {
      send: (key, args, timeoutMillis): Effect.Effect<unknown, LockRedisError> =>
        Effect.tryPromise({
          try: () => client.sendCommand(key, false, args),
          catch: (error) => classify(args[0] ?? "command", error)
        }).pipe(
          Effect.timeoutOrElse({
            duration: timeoutMillis,
            orElse: () => Effect.fail(classify(args[0] ?? "command", new Error(`no reply within ${timeoutMillis} ms`)))
          })
        ),
      masters: Effect.forEach(client.masters, (master) =>
        Effect.tryPromise({
          try: async () => nodeSend((await client.nodeClient(master as never)) as SingleNodeClient),
          catch: (error) => classify("connect", error)
        })
      ),
      sharded: true
    }
  }
  const node = nodeSend(isSentinel(client) ? masterOf(client) : client)
  return {
    send: (_key, args, timeoutMillis) => node(args, timeoutMillis),
    masters: Effect.succeed([node]),
    sharded: false
  }
}
