// The semaphores bench's libraries as its worker processes load them (peers/worker.ts, given this
// module as `drivers`): each is a semaphore of the workload's `limit`, one permit a call, driven by the
// peers bench's loops, so a cycle here is what a cycle is there. @sage/lock's `Semaphore` runs the
// Effect loops (sage.ts); the others implement the peers' `PromiseLock`:
// - redis-semaphore `Semaphore` and `MultiSemaphore` (its `permits` argument 1), through the driver of
//   its `Mutex` (peers/semaphore.ts): its defaults except the lease, a new object per call.
// - the baseline, the yardstick of every ratio: the peers baseline's loop (poll every 5-10 ms, a renewal
//   timer every lease/3, release; peers/baseline.ts) over the smallest correct semaphore, a sorted set
//   of holders scored with the end of their lease on the server's clock (the scripts below).
// - the protocol: the baseline's loop sending @sage/lock's own semaphore scripts by EVALSHA
//   (../semaphoreCommands.ts), none of its client code: the floor of what the `Semaphore` could reach
//   with its protocol. It polls a full semaphore as the baseline does (it registers no waiter), so in
//   the contended workloads it shows the scripts' cost, not the line's.
// - the ceiling: no semaphore, the body runs at once; only the contended workloads run it (plan.ts).
import type { LockOptions } from "redis-semaphore"
import type { Redis } from "ioredis"
import { type Load, type PromiseLock, type Runner, runner } from "../peers/drivers.ts"
import type { Protocol } from "../peers/baseline.ts"
import type { Acquirable } from "../peers/semaphore.ts"
import type { Workload } from "../peers/protocol.ts"
import { scriptSha } from "../scriptSha.ts"
import type { Library } from "./plan.ts"

/** The server's clock in milliseconds, as the first lines of a script. */
const serverNow = `local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)`

/**
 * Drops the expired holders of KEYS[1], then adds ARGV[1] with its lease's end (now + ARGV[3] ms) if
 * fewer than ARGV[2] remain: 1 when granted, 0 when full. The last ZREM deletes the set; a crashed
 * holder's entry stays until the next call drops it.
 */
const acquireScript = `${serverNow}
if redis.call("ZCARD", KEYS[1]) < tonumber(ARGV[2]) then
  redis.call("ZADD", KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  return 1
end
return 0`

/** Moves the lease's end of holder ARGV[1] to now + ARGV[2] ms if it still holds: 1, or 0 when gone. */
const renewScript = `${serverNow}
if redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  redis.call("ZADD", KEYS[1], "XX", now + tonumber(ARGV[2]), ARGV[1])
  return 1
end
return 0`

const acquireSha = scriptSha(acquireScript)
const renewSha = scriptSha(renewScript)

/** The baseline's commands for a semaphore of `limit`; release is ZREM, 1 while the holder was there. */
const baselineProtocol = (limit: number): Protocol => ({
  scripts: [acquireScript, renewScript],
  acquire: (key, token, lease) => ["EVALSHA", acquireSha, "1", key, token, String(limit), lease],
  granted: (reply) => reply === 1,
  renew: (key, token, lease) => ["EVALSHA", renewSha, "1", key, token, lease],
  release: (key, token) => ["ZREM", key, token]
})

/** A runner over one `PromiseLock` per limit, each connected on first use (in a warm-up, so never in a window). */
const perLimit = (make: (limit: number) => Promise<PromiseLock>): Runner => {
  const built = new Map<number, Promise<Runner>>()
  const runnerOf = (workload: Workload): Promise<Runner> => {
    const limit = workload.limit ?? 1
    const existing = built.get(limit)
    if (existing !== undefined) return existing
    const made = make(limit).then(runner)
    built.set(limit, made)
    return made
  }
  return {
    warm: async (workload, prefix) => (await runnerOf(workload)).warm(workload, prefix),
    run: async (workload, prefix, until) => (await runnerOf(workload)).run(workload, prefix, until),
    close: async () => {
      for (const made of built.values()) await (await made).close()
    }
  }
}

/** redis-semaphore objects that `create` makes, a new one per call, through peers/semaphore.ts's driver. */
const redisSemaphore = async (
  url: string,
  leaseMillis: number,
  create: (client: Redis, key: string, limit: number, options: LockOptions) => Acquirable
): Promise<Runner> => {
  const { makeWith } = await import("../peers/semaphore.ts")
  return perLimit((limit) => makeWith(url, leaseMillis, (client, key, options) => create(client, key, limit, options)))
}

export const load: Load = async (library, url, leaseMillis) => {
  switch (library as Library) {
    case "sage":
      return (await import("./sage.ts")).make(url, leaseMillis)
    case "semaphore": {
      const { Semaphore } = await import("redis-semaphore")
      return redisSemaphore(
        url,
        leaseMillis,
        (client, key, limit, options) => new Semaphore(client, key, limit, options)
      )
    }
    case "multi": {
      const { MultiSemaphore } = await import("redis-semaphore")
      return redisSemaphore(
        url,
        leaseMillis,
        (client, key, limit, options) => new MultiSemaphore(client, key, limit, 1, options)
      )
    }
    case "ceiling":
      return runner({ withLock: (_key, _waitMillis, body) => body().then(() => "ok"), close: async () => {} })
    case "protocol": {
      const { makeWith } = await import("../peers/baseline.ts")
      const { semaphoreProtocol } = await import("../semaphoreCommands.ts")
      return perLimit((limit) => makeWith(url, leaseMillis, semaphoreProtocol(limit)))
    }
    case "baseline": {
      const { makeWith } = await import("../peers/baseline.ts")
      return perLimit((limit) => makeWith(url, leaseMillis, baselineProtocol(limit)))
    }
  }
}
