// The raw commands @sage/lock's standalone backend sends for an uncontended acquire and release, for
// the sections that time the lock's scripts without its client code (pool.ts, peers/protocolFloor.ts).
// Same KEYS and ARGV as the backend: no waiter id (nobody waits), and the release's wake-up channel,
// publish command and claim window, which the script reads only when waiters are registered.
import { LockScripts } from "@sage/lock"
import { scriptSha } from "./scriptSha.ts"

/** SHA1s of the lock's scripts, for `EVALSHA` (the caller loads them with `SCRIPT LOAD`). */
export const lockScriptShas = {
  acquire: scriptSha(LockScripts.acquire),
  renew: scriptSha(LockScripts.renew),
  release: scriptSha(LockScripts.release)
} as const

/** The node-redis backend's claim window (only read by the script when waiters are registered). */
export const claimMillis = "500"

/** `EVALSHA` of the acquire script for `key`, held by `token` for `leaseMillis`. */
export const lockAcquireCommand = (key: string, token: string, leaseMillis: string): Array<string> => [
  "EVALSHA",
  lockScriptShas.acquire,
  "4",
  ...LockScripts.acquireKeysOf(key),
  token,
  leaseMillis,
  "",
  "0"
]

/** Whether an acquire script's reply granted the lock. */
export const lockGranted = (reply: unknown): boolean => Array.isArray(reply) && reply[0] === 1

/** `EVALSHA` of the renew script (reply 1 while `token` holds `key`). */
export const lockRenewCommand = (key: string, token: string, leaseMillis: string): Array<string> => [
  "EVALSHA",
  lockScriptShas.renew,
  "2",
  ...LockScripts.renewKeysOf(key),
  token,
  leaseMillis
]

/** `EVALSHA` of the release script (reply 1 when `token` held `key` and it is now deleted). */
export const lockReleaseCommand = (key: string, token: string): Array<string> => [
  "EVALSHA",
  lockScriptShas.release,
  "4",
  ...LockScripts.acquireKeysOf(key),
  token,
  LockScripts.wakeChannel(key),
  "PUBLISH",
  claimMillis
]
