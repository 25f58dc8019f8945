// The server's command counters (`INFO commandstats`) and its CPU time (`INFO cpu`), read by the parent
// on a connection of its own. Redis and Valkey count every command they execute, including each
// `redis.call` inside a script, so a script that runs GET then DEL counts as three calls (EVALSHA, GET,
// DEL). The bench's own INFO calls are counted too; the analysis leaves them out. The CPU time is the
// server process's (user + system, all its threads): with one library running at a time, what it spent
// in a window is what that library's commands cost the server, parsing and replies included.
import { createClient } from "redis"

/** One reading of the server's counters. */
export interface Snapshot {
  /** Calls per command (`calls` plus `rejected_calls`), subcommands as `client|setinfo`. */
  readonly calls: ReadonlyMap<string, number>
  /** The server process's CPU time so far (`used_cpu_user` + `used_cpu_sys`), microseconds. */
  readonly cpuMicros: number
}

export interface Counters {
  readonly read: () => Promise<Snapshot>
  readonly close: () => Promise<void>
}

/** The bench's own commands: never charged to a library. */
export const ownCommands: ReadonlySet<string> = new Set(["info"])

/** Commands that run a script: each one is a request, whatever the script calls inside. */
export const scriptCommands: ReadonlySet<string> = new Set(["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall"])

export const parseCalls = (text: string): Map<string, number> => {
  const calls = new Map<string, number>()
  for (const match of text.matchAll(/^cmdstat_(\S+):calls=(\d+)(?:.*rejected_calls=(\d+))?/gm)) {
    calls.set(match[1]!, Number(match[2]) + Number(match[3] ?? 0))
  }
  return calls
}

/** `used_cpu_user` + `used_cpu_sys` of an `INFO cpu` text, in microseconds (NaN if absent). */
export const parseCpuMicros = (text: string): number => {
  const seconds = (field: string) => Number(new RegExp(`^${field}:([0-9.]+)`, "m").exec(text)?.[1] ?? Number.NaN)
  return Math.round((seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6)
}

export const connect = async (url: string): Promise<Counters> => {
  const client = createClient({ url })
  client.on("error", () => {})
  await client.connect()
  return {
    // Two sections in one INFO needs Redis 7 or Valkey 7.2, which the bench's server is.
    read: async () => {
      const text = String(await client.sendCommand(["INFO", "commandstats", "cpu"]))
      return { calls: parseCalls(text), cpuMicros: parseCpuMicros(text) }
    },
    close: () => client.close()
  }
}
