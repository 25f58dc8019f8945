// The raw commands @sage/lock's standalone backend sends for a semaphore's acquire, renewal and
// release, for the semaphores bench's row that runs its scripts without its client code
// (semaphores/drivers.ts). Same KEYS and ARGV as the backend: no waiter id (the caller polls), and the
// wake-up channel, publish command and claim window, which the scripts read only when waiters are
// registered.
import { LockScripts, SemaphoreScripts } from "@sage/lock"
import { claimMillis } from "./lockCommands.ts"
import type { Protocol } from "./peers/baseline.ts"
import { scriptSha } from "./scriptSha.ts"

const shas = {
  acquire: scriptSha(SemaphoreScripts.acquire),
  renew: scriptSha(SemaphoreScripts.renew),
  release: scriptSha(SemaphoreScripts.release)
} as const

/** The semaphore's protocol for one permit of `limit`, as the polling loop of peers/baseline.ts sends it. */
export const semaphoreProtocol = (limit: number): Protocol => ({
  scripts: [SemaphoreScripts.acquire, SemaphoreScripts.renew, SemaphoreScripts.release],
  acquire: (key, token, lease) => [
    "EVALSHA",
    shas.acquire,
    "6",
    ...SemaphoreScripts.keysOf(key),
    token,
    lease,
    "",
    "0",
    LockScripts.wakeChannel(key),
    "PUBLISH",
    claimMillis,
    "1",
    String(limit)
  ],
  granted: (reply) => Array.isArray(reply) && reply[0] === 1,
  renew: (key, token, lease) => ["EVALSHA", shas.renew, "3", ...SemaphoreScripts.renewKeysOf(key), token, lease],
  release: (key, token) => [
    "EVALSHA",
    shas.release,
    "6",
    ...SemaphoreScripts.keysOf(key),
    token,
    LockScripts.wakeChannel(key),
    "PUBLISH",
    claimMillis
  ]
})
