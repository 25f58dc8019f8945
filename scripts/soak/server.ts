// What the server says during and after a soak run: its client connections (CLIENT LIST, INFO), the
// connections it accepted, its CPU, how many scripts ran and how many keys it holds, in one admin
// session per sample; and, at the end, the keys left in the run's namespace (SCAN, never KEYS).
import * as Effect from "effect/Effect"
import { LockScripts } from "@sage/lock"
import type { RedisServer, TestkitError } from "@sage/lock-testkit"

export interface ServerSample {
  /** Milliseconds since the load started (negative: before it). */
  readonly t: number
  /** Client connections other than this sampler's own. */
  readonly clients: number
  /** Of those, connections in subscriber mode (the lock's wake-up subscribers). */
  readonly subscribers: number
  /** `total_connections_received` (this sampler's sessions included). */
  readonly connectionsReceived: number
  /** Server CPU seconds (user + system) so far. */
  readonly cpuSeconds: number
  /** Scripts run so far (`EVALSHA` and `EVAL` calls). */
  readonly scripts: number
  readonly keys: number
}

const infoFields = (text: string): Map<string, string> => {
  const fields = new Map<string, string>()
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(":")
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1))
  }
  return fields
}

const scriptCalls = (fields: Map<string, string>): number => {
  let calls = 0
  for (const name of ["cmdstat_evalsha", "cmdstat_eval"]) {
    const match = /calls=(\d+)/.exec(fields.get(name) ?? "")
    calls += Number(match?.[1] ?? 0)
  }
  return calls
}

/** One sample of the server, taken `t` ms into the load, in one admin connection. */
export const sample = (
  server: RedisServer.RedisServer,
  t: number
): Effect.Effect<ServerSample, TestkitError.TestkitError> =>
  Effect.map(
    server.session([["CLIENT", "LIST"], ["INFO", "clients", "stats", "cpu", "commandstats"], ["DBSIZE"]]),
    ([list, info, keys]): ServerSample => {
      // Our own connection is the one running CLIENT LIST.
      const others = String(list)
        .split(/\r?\n/)
        .filter((line) => line.trim() !== "" && !line.includes("cmd=client|list"))
      const fields = infoFields(String(info))
      return {
        t,
        clients: others.length,
        subscribers: others.filter((line) => /\b(sub|psub|ssub)=[1-9]/.test(line)).length,
        connectionsReceived: Number(fields.get("total_connections_received") ?? Number.NaN),
        cpuSeconds:
          Number(fields.get("used_cpu_user") ?? Number.NaN) + Number(fields.get("used_cpu_sys") ?? Number.NaN),
        scripts: scriptCalls(fields),
        keys: Number(keys)
      }
    }
  )

export interface KeysLeft {
  /** Keys of the namespace other than fence keys: lock keys, waiter queues (should be none). */
  readonly others: ReadonlyArray<string>
  /** Fence keys: a lock's last fencing token, kept on purpose for a week after the lock is freed. */
  readonly fences: number
}

/** The keys of `namespace` on the server, by SCAN. */
export const keysLeft = (
  server: RedisServer.RedisServer,
  namespace: string
): Effect.Effect<KeysLeft, TestkitError.TestkitError> =>
  Effect.gen(function* () {
    const others: Array<string> = []
    let fences = 0
    let cursor = "0"
    do {
      const reply = yield* server.command("SCAN", cursor, "MATCH", `${namespace}:*`, "COUNT", "5000")
      const [next, keys] = Array.isArray(reply) ? reply : ["0", []]
      cursor = String(next)
      for (const key of Array.isArray(keys) ? keys : []) {
        const text = String(key)
        if (text === LockScripts.fenceKey(text.slice(0, -":fence".length))) fences++
        else others.push(text)
      }
    } while (cursor !== "0")
    return { others: others.toSorted(), fences }
  })
