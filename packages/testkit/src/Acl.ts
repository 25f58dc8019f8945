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
    // one (packages/node-redis/src/internal/wakeups/). Without it the refusal still counts as an answer.
    ...(cluster
      ? ["spublish", "ssubscribe", "sunsubscribe", "ping", "cluster|slots", "asking"]
      : ["publish", "subscribe", "unsubscribe", "ping"]),
    ...(replicated ? ["role"] : []),
    ...(acknowledged ? ["wait"] : []),
    // Standalone: each connection's id and address, and closing a silent one at the server before
    // replacing it (packages/node-redis/src/internal/connection/silentConnection.ts). Optional: without them it
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
  createUserWithRules(nodes, options.user, rules(mode, options.namespace, options.password))

/**
 * What a `LockAdmin` user may do: `read` runs `inspect` and `list` (and `sage-lock inspect`/`list`)
 * with read-only access to the namespace's keys; `release` adds `forceRelease` (`DEL` of a lock key).
 */
export type AdminAccess = "read" | "release"

export const adminAccesses: ReadonlyArray<AdminAccess> = ["read", "release"]

/** Where a `LockAdmin` user connects: one node (standalone, or a Sentinel deployment's master) or a Cluster. */
export type AdminDeployment = "single" | "cluster"

export const adminDeployments: ReadonlyArray<AdminDeployment> = ["single", "cluster"]

/**
 * The commands a `LockAdmin` user needs: the read script (`EVAL_RO`, which declares its keys
 * read-only) and what it calls, `SCAN` for `list`, `DEL` for `forceRelease`, and on a Cluster the
 * client's slot map.
 */
export const adminCommands = (access: AdminAccess, deployment: AdminDeployment): Array<string> => [
  "eval_ro",
  "time",
  "pttl",
  "get",
  "zcount",
  "scan",
  ...(access === "release" ? ["del"] : []),
  ...(deployment === "cluster" ? ["cluster|slots"] : [])
]

/** The `ACL SETUSER` rules of a `LockAdmin` user: the namespace's keys (read-only for `read`), no channels. */
export const adminRules = (
  access: AdminAccess,
  deployment: AdminDeployment,
  namespace: string,
  password: string
): Array<string> => [
  "on",
  `>${password}`,
  "resetkeys",
  `${access === "read" ? "%R" : ""}~${namespace}:*`,
  "resetchannels",
  "-@all",
  ...adminCommands(access, deployment).map((command) => `+${command}`)
]

/** The documented `LockAdmin` line, e.g. `ACL SETUSER lockadmin on >… resetkeys %R~billing:* …`. */
export const adminLine = (
  access: AdminAccess,
  deployment: AdminDeployment,
  namespace: string,
  user = "lockadmin"
): string => ["ACL SETUSER", user, ...adminRules(access, deployment, namespace, "<password>")].join(" ")

/** Creates (or resets) `user` with exactly `rules` (as after `ACL SETUSER <user>`) on every node. */
export const createUserWithRules = (
  nodes: ReadonlyArray<RedisServer>,
  user: string,
  rules: ReadonlyArray<string>
): Effect.Effect<void, TestkitError> =>
  Effect.forEach(
    nodes,
    (node) => Effect.andThen(node.command("ACL", "DELUSER", user), node.command("ACL", "SETUSER", user, ...rules)),
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

/**
 * The denials `ACL LOG` recorded on `nodes`, except node-redis's `CLIENT SETINFO` at connect: it
 * ignores the refusal (nothing here needs it), Redis 7.0 does not know the command at all, and Redis
 * 7.2+ and Valkey log one denial per connection (docs/topologies.md says how to silence it).
 */
export const denialsExceptClientSetinfo = (
  nodes: ReadonlyArray<RedisServer>
): Effect.Effect<Array<string>, TestkitError> =>
  Effect.map(Effect.forEach(nodes, denials), (lists) =>
    lists.flat().filter((entry) => entry !== "command:client|setinfo")
  )

/** Empties `ACL LOG` on every node. */
export const resetLogs = (nodes: ReadonlyArray<RedisServer>): Effect.Effect<void, TestkitError> =>
  Effect.forEach(nodes, (node) => node.command("ACL", "LOG", "RESET"), { discard: true })
