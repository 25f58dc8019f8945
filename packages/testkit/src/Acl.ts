/**
 * The least-privilege ACL of a lock user, per deployment mode, as docs/topologies.md states it: the
 * commands the backend sends (scripts by SHA1 with an `EVAL` fallback, `ROLE` and `WAIT` on replicated
 * deployments, the wake-up pub/sub, the cluster client's slot discovery), the commands the Lua scripts
 * call (a script runs with its caller's permissions), and the namespace's keys and wake channels.
 * Tests create users from these lists and run the lock with them, so the documented lines are proven
 * to be enough (and a line missing one command is proven not to be).
 */
import * as Effect from "effect/Effect"
import type { RedisServer } from "./RedisServer.ts"
import type { TestkitError } from "./TestkitError.ts"

/** Deployment modes with different needs: replicated means Sentinel-managed master and replicas. */
export type Mode = "standalone" | "replicated" | "replicated-no-ack" | "cluster" | "cluster-no-ack"

export const modes: ReadonlyArray<Mode> = ["standalone", "replicated", "replicated-no-ack", "cluster", "cluster-no-ack"]

/** What the lock scripts call (LockScripts.ts); a script runs with its caller's permissions. */
export const scriptCommands: ReadonlyArray<string> = [
  "get",
  "set",
  "pexpire",
  "pttl",
  "del",
  "exists",
  "time",
  "zadd",
  "zrange",
  "zrangebyscore",
  "zrem"
]

/** The commands a lock user needs in `mode`, sorted as the docs list them. */
export const commands = (mode: Mode): Array<string> => {
  const cluster = mode === "cluster" || mode === "cluster-no-ack"
  const replicated = mode !== "standalone"
  const acknowledged = mode === "replicated" || mode === "cluster"
  return [
    "evalsha",
    "eval",
    ...scriptCommands,
    // `ping`: asked of a wake-up subscriber when a wait ran out without a message, to find a silent
    // one (packages/node-redis/src/internal/wakeups.ts). Without it the refusal still counts as an answer.
    ...(cluster
      ? ["spublish", "ssubscribe", "sunsubscribe", "ping", "cluster|slots", "asking"]
      : ["publish", "subscribe", "unsubscribe", "ping"]),
    ...(replicated ? ["role"] : []),
    ...(acknowledged ? ["wait"] : []),
    // Standalone: each connection's id and address, and closing a silent one at the server before
    // replacing it (packages/node-redis/src/internal/silentConnection.ts). Optional: without them it
    // is kept (`client|id` instead of `client|info` also works, without the address check).
    ...(replicated ? [] : ["client|info", "client|kill"])
  ]
}

/** The `ACL SETUSER` rules after the user name: on, the password, the namespace's keys and channels, the commands. */
export const rules = (mode: Mode, namespace: string, password: string): Array<string> => [
  "on",
  `>${password}`,
  "resetkeys",
  `~${namespace}:*`,
  "resetchannels",
  `&${namespace}:*`,
  "-@all",
  ...commands(mode).map((command) => `+${command}`)
]

/** The documented line, e.g. `ACL SETUSER locker on >… resetkeys ~billing:* …` (password shown as `<password>`). */
export const line = (mode: Mode, namespace: string, user = "locker"): string =>
  ["ACL SETUSER", user, ...rules(mode, namespace, "<password>")].join(" ")

/** Creates (or resets) `user` with the rules of `mode` on every node. */
export const createUser = (
  nodes: ReadonlyArray<RedisServer>,
  mode: Mode,
  options: { readonly user: string; readonly password: string; readonly namespace: string }
): Effect.Effect<void, TestkitError> =>
  Effect.forEach(
    nodes,
    (node) =>
      Effect.andThen(
        node.command("ACL", "DELUSER", options.user),
        node.command("ACL", "SETUSER", options.user, ...rules(mode, options.namespace, options.password))
      ),
    { discard: true }
  )

/** `ACL LOG` entries of a node as "reason:object" (e.g. "command:wait"); empty when nothing was denied. */
export const denials = (node: RedisServer): Effect.Effect<Array<string>, TestkitError> =>
  Effect.map(node.command("ACL", "LOG"), (reply) =>
    (Array.isArray(reply) ? reply : []).map((entry) => {
      const fields: Record<string, string> = {}
      const list = Array.isArray(entry) ? entry : []
      for (let i = 0; i + 1 < list.length; i += 2) fields[String(list[i])] = String(list[i + 1])
      return `${fields["reason"] ?? "?"}:${fields["object"] ?? "?"}`
    })
  )
