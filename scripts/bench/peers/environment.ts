// What a peers report says about where it ran: the packages' versions, the load average and the
// server's version. Shared by the bench's two entry points (main.ts, interleaved.ts).
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Effect from "effect/Effect"
import type { RedisServer } from "@sage/lock-testkit"
import { now } from "../stats.ts"

/** The installed version of a dependency of `scripts/`, or "?" when it cannot be read. */
export const packageVersion = (name: string): string => {
  try {
    const text = Fs.readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), "utf8")
    return String((JSON.parse(text) as { version?: unknown }).version).replace(/^v/, "")
  } catch {
    return "?"
  }
}

/** The 1, 5 and 15 minute load averages, as "0.54 0.76 1.08". */
export const loadAverage = (): string =>
  Os.loadavg()
    .map((value) => value.toFixed(2))
    .join(" ")

/** "redis 7.0.15", from the server's INFO (its flavor when INFO fails). */
export const serverVersion = (server: RedisServer.RedisServer): Effect.Effect<string> =>
  server.command("INFO", "server").pipe(
    Effect.map((reply) => `redis ${/redis_version:(\S+)/.exec(String(reply))?.[1] ?? "?"}`),
    Effect.orElseSucceed(() => server.flavor)
  )

/** The machine, in one line: cores, memory, kernel. */
export const machine = (): string => {
  const cpus = Os.cpus()
  return (
    `${cpus.length} cores (${cpus[0]?.model ?? "?"}), ${(Os.totalmem() / 2 ** 30).toFixed(1)} GiB, ` +
    `${Os.type()} ${Os.release()}; workers and server share the cores, all traffic on loopback`
  )
}

/** The versions of Node and of every library the bench compares, in one line. */
export const versions = (server: string): string =>
  `${server}, one server; node ${process.version}, effect ${packageVersion("effect")}, ` +
  `node-redis ${packageVersion("redis")}, ioredis ${packageVersion("ioredis")}, ` +
  `redlock ${packageVersion("redlock")}, @sesamecare-oss/redlock ${packageVersion("@sesamecare-oss/redlock")}, ` +
  `redis-semaphore ${packageVersion("redis-semaphore")}`

/** Progress for stderr, each line stamped with the time since `began` and the load: "[peers 12.3s, load 0.54 0.76 1.08] …". */
export const progressTo =
  (label: string, began: number) =>
  (text: string): void => {
    process.stderr.write(`[${label} ${((now() - began) / 1000).toFixed(1)}s, load ${loadAverage()}] ${text}\n`)
  }
