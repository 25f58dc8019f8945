// The server's command counters (`INFO commandstats`), read by the parent on a connection of its own.
// Redis and Valkey count every command they execute, including each `redis.call` inside a script, so a
// script that runs GET then DEL counts as three calls (EVALSHA, GET, DEL). The bench's own INFO calls
// are counted too; the analysis leaves them out.
import { createClient } from "redis"

export interface Counters {
  /** Calls per command (`calls` plus `rejected_calls`), subcommands as `client|setinfo`. */
  readonly read: () => Promise<ReadonlyMap<string, number>>
  readonly close: () => Promise<void>
}

/** The bench's own commands: never charged to a library. */
export const ownCommands: ReadonlySet<string> = new Set(["info"])

/** Commands that run a script: each one is a request, whatever the script calls inside. */
export const scriptCommands: ReadonlySet<string> = new Set(["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall"])

export const parse = (text: string): Map<string, number> => {
  const calls = new Map<string, number>()
  for (const match of text.matchAll(/^cmdstat_(\S+):calls=(\d+)(?:.*rejected_calls=(\d+))?/gm)) {
    calls.set(match[1]!, Number(match[2]) + Number(match[3] ?? 0))
  }
  return calls
}

export const connect = async (url: string): Promise<Counters> => {
  const client = createClient({ url })
  client.on("error", () => {})
  await client.connect()
  return {
    read: async () => parse(String(await client.sendCommand(["INFO", "commandstats"]))),
    close: () => client.close()
  }
}
