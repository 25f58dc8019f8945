// The hand-written baseline: the smallest correct lock one would write on node-redis, and the yardstick
// for every ratio. Acquire is `SET key token NX PX lease`; a busy key is polled again every 5-10 ms
// (uniform jitter) until the wait budget is spent. While the body runs, a timer renews every lease/3 with
// a compare-and-PEXPIRE script. Release is a compare-and-DEL script by EVALSHA. A renewal or release
// that finds another token reports the lock as lost; a renewal that fails on the wire is just tried again
// at the next tick (the release then tells whether the lease survived).
import * as Crypto from "node:crypto"
import { createClient } from "redis"
import { clockMillis } from "./clock.ts"
import { type Outcome, type PromiseLock, sleep } from "./drivers.ts"

const releaseScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`
const renewScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) end return 0`

const pollMillis = (): number => 5 + Math.random() * 5

export const make = async (url: string, leaseMillis: number): Promise<PromiseLock> => {
  const client = createClient({ url })
  // Errors reach the awaiting command; without a listener node-redis would also throw them globally.
  client.on("error", () => {})
  await client.connect()
  const releaseSha = String(await client.sendCommand(["SCRIPT", "LOAD", releaseScript]))
  const renewSha = String(await client.sendCommand(["SCRIPT", "LOAD", renewScript]))
  const lease = String(leaseMillis)

  const acquire = async (key: string, token: string, waitMillis: number): Promise<boolean> => {
    const deadline = clockMillis() + waitMillis
    for (;;) {
      const reply: unknown = await client.sendCommand(["SET", key, token, "NX", "PX", lease])
      if (reply === "OK") return true
      const pause = pollMillis()
      if (clockMillis() + pause >= deadline) return false
      await sleep(pause)
    }
  }

  const withLock = async (key: string, waitMillis: number, body: () => Promise<void>): Promise<Outcome> => {
    const token = Crypto.randomUUID()
    if (!(await acquire(key, token, waitMillis))) return "timeout"
    let lost = false
    const renewal = setInterval(() => {
      client.sendCommand(["EVALSHA", renewSha, "1", key, token, lease]).then(
        (reply: unknown) => {
          if (reply !== 1) lost = true
        },
        () => {}
      )
    }, leaseMillis / 3)
    let released: unknown
    try {
      await body()
    } finally {
      clearInterval(renewal)
      released = await client.sendCommand(["EVALSHA", releaseSha, "1", key, token])
    }
    return lost || released !== 1 ? "lost" : "ok"
  }

  return { withLock, close: () => client.close() }
}
