// What the admin functions (locks.ts, semaphores.ts) work over, whatever the client: the node that
// owns a key, the masters a namespace's keys may be on, and whether wake-ups are sharded; and what
// they share: checking a key's format, finding a namespace's keys by SCAN, and the `{ force: true }`
// confirmation.
import * as Effect from "effect/Effect"
import { InvalidArgument, type LockRedisError } from "@sage/lock/LockError"
import { valueText } from "../options/valueText.ts"
import { unexpected } from "../replies.ts"

/** Sends one command to one node within a time limit. */
export type NodeSend = (args: Array<string>, timeoutMillis: number) => Effect.Effect<unknown, LockRedisError>

/** A deployment as the admin functions see it. */
export interface AdminTarget {
  /** Sends one command to the master holding `key` (a lock's or semaphore's keys share one slot). */
  readonly send: (key: string, args: Array<string>, timeoutMillis: number) => Effect.Effect<unknown, LockRedisError>
  /** Every master, each once: where a namespace's keys may be. */
  readonly masters: Effect.Effect<ReadonlyArray<NodeSend>, LockRedisError>
  /** Whether releases wake waiters with `SPUBLISH` (Cluster) instead of `PUBLISH`. */
  readonly sharded: boolean
}

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
  send: NodeSend,
  namespace: string,
  timeoutMillis: number
): Effect.Effect<Array<string>, LockRedisError> =>
  Effect.gen(function* () {
    const found: Array<string> = []
    let cursor = "0"
    do {
      const reply = yield* send(
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
  target: AdminTarget,
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
    const nodes = yield* target.masters
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
