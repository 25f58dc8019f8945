// The baseline's loop with @sage/lock's protocol: the hand-written node-redis lock of baseline.ts, but
// acquiring, renewing and releasing with the lock's own scripts (`LockScripts`: the waiter-queue check
// and the fencing token on every acquisition, the queue check on every release), sent raw by EVALSHA.
// None of the lock's client code runs. It is the floor of what the lock could reach with its protocol
// on this machine: the gap from the baseline to it is the protocol's, from it to @sage/lock the
// client's. It polls a busy key as the baseline does (it registers no waiter), so in the contended
// workloads it shows the protocol's cost, not the lock's queueing.
import * as Crypto from "node:crypto"
import { LockScripts } from "@sage/lock"
import { createClient } from "redis"
import { clockMillis } from "./clock.ts"
import { type Outcome, type PromiseLock, sleep } from "./drivers.ts"

const pollMillis = (): number => 5 + Math.random() * 5

/** The lock's claim window, as the node-redis backend sends it (only read when waiters are registered). */
const claimMillis = "500"

export const make = async (url: string, leaseMillis: number): Promise<PromiseLock> => {
  const client = createClient({ url })
  // Errors reach the awaiting command; without a listener node-redis would also throw them globally.
  client.on("error", () => {})
  await client.connect()
  const acquireSha = String(await client.sendCommand(["SCRIPT", "LOAD", LockScripts.acquire]))
  const renewSha = String(await client.sendCommand(["SCRIPT", "LOAD", LockScripts.renew]))
  const releaseSha = String(await client.sendCommand(["SCRIPT", "LOAD", LockScripts.release]))
  const lease = String(leaseMillis)

  const acquire = async (keys: ReadonlyArray<string>, token: string, waitMillis: number): Promise<boolean> => {
    const deadline = clockMillis() + waitMillis
    for (;;) {
      const reply: unknown = await client.sendCommand(["EVALSHA", acquireSha, "4", ...keys, token, lease, "", "0"])
      if (Array.isArray(reply) && reply[0] === 1) return true
      const pause = pollMillis()
      if (clockMillis() + pause >= deadline) return false
      await sleep(pause)
    }
  }

  const withLock = async (key: string, waitMillis: number, body: () => Promise<void>): Promise<Outcome> => {
    const token = Crypto.randomUUID()
    const keys = LockScripts.acquireKeysOf(key)
    if (!(await acquire(keys, token, waitMillis))) return "timeout"
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
      released = await client.sendCommand([
        "EVALSHA",
        releaseSha,
        "4",
        ...keys,
        token,
        LockScripts.wakeChannel(key),
        "PUBLISH",
        claimMillis
      ])
    }
    return lost || released !== 1 ? "lost" : "ok"
  }

  return { withLock, close: () => client.close() }
}
