// The hand-written baseline: the smallest correct lock one would write on node-redis, and the yardstick
// for every ratio. Acquire is `SET key token NX PX lease`; a busy key is polled again every 5-10 ms
// (uniform jitter) until the wait budget is spent. While the body runs, a timer renews every lease/3 with
// a compare-and-PEXPIRE script. Release is a compare-and-DEL script by EVALSHA. A renewal or release
// that finds another token reports the lock as lost; a renewal that fails on the wire is just tried again
// at the next tick (the release then tells whether the lease survived).
// The loop takes its commands from a `Protocol`, so protocolFloor.ts runs the same loop with the lock's
// own scripts.
import * as Crypto from "node:crypto"
import { createClient } from "redis"
import { scriptSha } from "../scriptSha.ts"
import { clockMillis } from "./clock.ts"
import { type Outcome, type PromiseLock, sleep } from "./drivers.ts"
import { compareAndDelete, compareAndExpire } from "../baselineScripts.ts"

/** The commands a polling lock sends; each renew or release replies 1 while the token holds the key. */
export interface Protocol {
  /** Scripts to `SCRIPT LOAD` once on connect; the commands below may name them by SHA1. */
  readonly scripts: ReadonlyArray<string>
  readonly acquire: (key: string, token: string, leaseMillis: string) => Array<string>
  readonly granted: (reply: unknown) => boolean
  readonly renew: (key: string, token: string, leaseMillis: string) => Array<string>
  readonly release: (key: string, token: string) => Array<string>
}

const releaseSha = scriptSha(compareAndDelete)
const renewSha = scriptSha(compareAndExpire)

/** `SET NX PX`, compare-and-PEXPIRE, compare-and-DEL. */
const handWritten: Protocol = {
  scripts: [compareAndDelete, compareAndExpire],
  acquire: (key, token, lease) => ["SET", key, token, "NX", "PX", lease],
  granted: (reply) => reply === "OK",
  renew: (key, token, lease) => ["EVALSHA", renewSha, "1", key, token, lease],
  release: (key, token) => ["EVALSHA", releaseSha, "1", key, token]
}

const pollMillis = (): number => 5 + Math.random() * 5

/** The baseline's loop (poll, renewal timer, release) over the commands of `protocol`. */
export const makeWith = async (url: string, leaseMillis: number, protocol: Protocol): Promise<PromiseLock> => {
  const client = createClient({ url })
  // Errors reach the awaiting command; without a listener node-redis would also throw them globally.
  client.on("error", () => {})
  await client.connect()
  for (const script of protocol.scripts) await client.sendCommand(["SCRIPT", "LOAD", script])
  const lease = String(leaseMillis)

  const acquire = async (key: string, token: string, waitMillis: number): Promise<boolean> => {
    const deadline = clockMillis() + waitMillis
    for (;;) {
      if (protocol.granted(await client.sendCommand(protocol.acquire(key, token, lease)))) return true
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
      client.sendCommand(protocol.renew(key, token, lease)).then(
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
      released = await client.sendCommand(protocol.release(key, token))
    }
    return lost || released !== 1 ? "lost" : "ok"
  }

  return { withLock, close: () => client.close() }
}

/** The hand-written node-redis lock. */
export const make = (url: string, leaseMillis: number): Promise<PromiseLock> => makeWith(url, leaseMillis, handWritten)
