// The lock scripts, each with its SHA1, and the `KEYS` and `ARGV` of each call, for every deployment.
// They run by SHA1 (`EVALSHA`), falling back to `EVAL` on `NOSCRIPT` (connection/commands.ts), which
// also puts the script back into the server's cache (after a restart, a failover or `SCRIPT FLUSH`).
import { createHash } from "node:crypto"
import { ElectionScripts, LockScripts, SemaphoreScripts } from "@sage/lock"
import type { LeaseRequest, Permits, ProclaimRequest, TransferRequest } from "@sage/lock/LockBackend"

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

export const semaphoreAcquire: Script = script("semaphoreAcquire", SemaphoreScripts.acquire)
export const semaphoreRenew: Script = script("semaphoreRenew", SemaphoreScripts.renew)
export const semaphoreRelease: Script = script("semaphoreRelease", SemaphoreScripts.release)
export const semaphoreRenewAll: Script = script("semaphoreRenewAll", SemaphoreScripts.renewAll)
export const semaphoreLeave: Script = script("semaphoreLeave", SemaphoreScripts.leave)
export const semaphoreCheck: Script = script("semaphoreCheck", SemaphoreScripts.check)

export const electionProclaim: Script = script("electionProclaim", ElectionScripts.proclaim)
export const electionRead: Script = script("electionRead", ElectionScripts.read)
export const electionAnnounce: Script = script("electionAnnounce", ElectionScripts.announce)

export const all: ReadonlyArray<Script> = [
  acquire,
  renew,
  release,
  transfer,
  renewAll,
  leave,
  check,
  fencedSet,
  semaphoreAcquire,
  semaphoreRenew,
  semaphoreRelease,
  semaphoreRenewAll,
  semaphoreLeave,
  semaphoreCheck,
  electionProclaim,
  electionRead,
  electionAnnounce
]

// Which script a request runs: a semaphore's (the request carries permits) or a lock's.

export const acquireScript = (request: LeaseRequest): Script =>
  request.permits === undefined ? acquire : semaphoreAcquire
export const renewScript = (request: LeaseRequest): Script => (request.permits === undefined ? renew : semaphoreRenew)
export const releaseScript = (request: LeaseRequest): Script =>
  request.permits === undefined ? release : semaphoreRelease
export const checkScript = (request: LeaseRequest): Script => (request.permits === undefined ? check : semaphoreCheck)
export const leaveScript = (permits: Permits | undefined): Script => (permits === undefined ? leave : semaphoreLeave)

/** Whether `script` grants a lease (a lock's or a semaphore's acquire). */
export const isAcquire = (script: Script): boolean => script === acquire || script === semaphoreAcquire

/**
 * Whether `script` writes or reads a lease the replicas must hold (acquire, renew, check), or an
 * election's leader record, which counts only while its lease does.
 */
export const touchesLease = (script: Script): boolean =>
  script === electionProclaim ||
  script === electionRead ||
  script === acquire ||
  script === renew ||
  script === check ||
  script === semaphoreAcquire ||
  script === semaphoreRenew ||
  script === semaphoreCheck

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
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] =>
  request.permits === undefined
    ? [
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
    : [
        SemaphoreScripts.keysOf(request.key),
        [
          request.token,
          String(request.leaseMillis),
          request.waiter?.id ?? "",
          String(request.waiter?.ttlMillis ?? 0),
          LockScripts.wakeChannel(request.key),
          publish,
          String(claimMillis),
          String(request.permits.count),
          String(request.permits.limit)
        ]
      ]

/** `KEYS` and `ARGV` of the release script for a request. */
export const releaseCall = (
  request: LeaseRequest,
  publish: Publish
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  request.permits === undefined ? LockScripts.acquireKeysOf(request.key) : SemaphoreScripts.keysOf(request.key),
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
  publish: Publish,
  permits?: Permits | undefined
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  permits === undefined ? LockScripts.acquireKeysOf(key) : SemaphoreScripts.keysOf(key),
  [waiterId, LockScripts.wakeChannel(key), publish, String(claimMillis)]
]

/**
 * Arguments of `EVALSHA`/`EVAL` for a many-key renewal script: every lease's key, then each of its
 * companions (`companionsOf`, in that order) for every key, then the tokens and the lease.
 */
const manyKeyRenewArgs =
  (script: Script, companionsOf: ReadonlyArray<(key: string) => string>) =>
  (
    mode: "EVALSHA" | "EVAL",
    keys: ReadonlyArray<string>,
    tokens: ReadonlyArray<string>,
    leaseMillis: number
  ): Array<string> => [
    mode,
    mode === "EVALSHA" ? script.sha1 : script.lua,
    String(keys.length * (1 + companionsOf.length)),
    ...keys,
    ...companionsOf.flatMap((companionOf) => keys.map(companionOf)),
    ...tokens,
    String(leaseMillis)
  ]

/** Arguments of `EVALSHA`/`EVAL` for the many-key `renewAll` script (locks and their fence keys). */
export const renewAllArgs = manyKeyRenewArgs(renewAll, [LockScripts.fenceKey])

/** `KEYS` and `ARGV` of the renew script for a request. */
export const renewCall = (request: LeaseRequest): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  request.permits === undefined ? LockScripts.renewKeysOf(request.key) : SemaphoreScripts.renewKeysOf(request.key),
  [request.token, String(request.leaseMillis)]
]

/** Arguments of `EVALSHA`/`EVAL` for the semaphore's `renewAll` (permits hashes, then fence keys). */
export const semaphoreRenewAllArgs = manyKeyRenewArgs(semaphoreRenewAll, [
  SemaphoreScripts.permitsKey,
  LockScripts.fenceKey
])

/** `KEYS` and `ARGV` of an election's proclamation. */
export const proclaimCall = (
  request: ProclaimRequest,
  publish: Publish
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  ElectionScripts.keysOf(request.key),
  [
    String(request.term),
    request.candidate,
    request.value,
    LockScripts.wakeChannel(request.key),
    publish,
    ElectionScripts.observerId
  ]
]

/** `KEYS` and `ARGV` of an election's read. */
export const electionReadCall = (key: string): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  ElectionScripts.keysOf(key),
  []
]

/** `KEYS` and `ARGV` of a word to an election's observers. */
export const announceCall = (
  key: string,
  publish: Publish
): readonly [ReadonlyArray<string>, ReadonlyArray<string>] => [
  ElectionScripts.keysOf(key),
  [LockScripts.wakeChannel(key), publish, ElectionScripts.observerId]
]
