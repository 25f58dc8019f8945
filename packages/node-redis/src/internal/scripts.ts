// The lock scripts, each with its SHA1, and the `KEYS` and `ARGV` of each call, for every deployment.
// They run by SHA1 (`EVALSHA`), falling back to `EVAL` on `NOSCRIPT` (connection/commands.ts), which
// also puts the script back into the server's cache (after a restart, a failover or `SCRIPT FLUSH`).
import { createHash } from "node:crypto"
import { LockScripts } from "@sage/lock"
import type { LeaseRequest, TransferRequest } from "@sage/lock/LockBackend"

export interface Script {
  readonly name: string
  readonly lua: string
  readonly sha1: string
}

const script = (name: string, lua: string): Script => ({
  name,
  lua,
  sha1: createHash("sha1").update(lua).digest("hex")
})

export const acquire: Script = script("acquire", LockScripts.acquire)
export const renew: Script = script("renew", LockScripts.renew)
export const release: Script = script("release", LockScripts.release)
export const transfer: Script = script("transfer", LockScripts.transfer)

export const renewAll: Script = script("renewAll", LockScripts.renewAll)
export const leave: Script = script("leave", LockScripts.leave)
export const check: Script = script("check", LockScripts.check)
export const fencedSet: Script = script("fencedSet", LockScripts.fencedSet)

export const all: ReadonlyArray<Script> = [acquire, renew, release, transfer, renewAll, leave, check, fencedSet]

/** Arguments of `EVALSHA`/`EVAL` for a script over `keys`. */
export const evalArgs = (
  mode: "EVALSHA" | "EVAL",
  self: Script,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string>
): Array<string> => [mode, mode === "EVALSHA" ? self.sha1 : self.lua, String(keys.length), ...keys, ...args]

/** The publish command releases use to wake a waiter: sharded on Cluster, plain elsewhere. */
export type Publish = "PUBLISH" | "SPUBLISH"

/**
 * How long a woken waiter has to claim a released lock before the line moves past it: a live one
 * claims within a round trip; a dead one holds up the others for this long at most.
 */
export const claimMillis = 500

/**
 * `KEYS` and `ARGV` of the acquire script for a request: with the wake-up channel, so that a free key
 * goes past waiters whose process is gone to the first live one.
 */
export const acquireCall = (
  request: LeaseRequest,
  publish: Publish
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  LockScripts.acquireKeysOf(request.key),
  [
    request.token,
    String(request.leaseMillis),
    request.waiter?.id ?? "",
    String(request.waiter?.ttlMillis ?? 0),
    LockScripts.wakeChannel(request.key),
    publish,
    String(claimMillis)
  ]
]

/** `KEYS` and `ARGV` of the release script for a request. */
export const releaseCall = (
  request: LeaseRequest,
  publish: Publish
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  LockScripts.acquireKeysOf(request.key),
  request.fence === undefined
    ? [request.token, LockScripts.wakeChannel(request.key), publish, String(claimMillis)]
    : [request.token, LockScripts.wakeChannel(request.key), publish, String(claimMillis), String(request.fence)]
]

/** `KEYS` and `ARGV` of the transfer script for a request. */
export const transferCall = (request: TransferRequest): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  LockScripts.acquireKeysOf(request.key),
  [request.token, request.successorToken, String(request.leaseMillis), request.waiter?.id ?? ""]
]

/** `KEYS` and `ARGV` of the check script for a request. */
export const checkCall = (request: LeaseRequest): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  [request.key],
  [request.token]
]

/** `KEYS` and `ARGV` of the leave script. */
export const leaveCall = (
  key: string,
  waiterId: string,
  publish: Publish
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  LockScripts.acquireKeysOf(key),
  [waiterId, LockScripts.wakeChannel(key), publish, String(claimMillis)]
]

/** Arguments of `EVALSHA`/`EVAL` for the many-key `renewAll` script. */
export const renewAllArgs = (
  mode: "EVALSHA" | "EVAL",
  keys: ReadonlyArray<string>,
  tokens: ReadonlyArray<string>,
  leaseMillis: number
): Array<string> => [
  mode,
  mode === "EVALSHA" ? renewAll.sha1 : renewAll.lua,
  String(keys.length * 2),
  ...keys,
  ...keys.map(LockScripts.fenceKey),
  ...tokens,
  String(leaseMillis)
]

/** `KEYS` and `ARGV` of the renew script for a request. */
export const renewCall = (request: LeaseRequest): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  LockScripts.renewKeysOf(request.key),
  [request.token, String(request.leaseMillis)]
]
