// What the commands print: aligned text for people, one line of JSON for scripts (`--json`; absent
// values are `null` so every object has the same fields).
import { LockScripts } from "@sage/lock"
import type { LockAdmin, SemaphoreAdmin } from "@sage/lock-node-redis"

/** A lock as the commands report it. */
export interface Report {
  /** The key as the application passes it to `withLock` (null when the Redis key is not one of ours). */
  readonly key: string | null
  readonly redisKey: string
  readonly held: boolean
  readonly remainingMillis: number | null
  readonly lastFencingToken: number | null
  readonly waiters: number
}

const unescapes: Record<string, string> = { "%25": "%", "%7B": "{", "%7D": "}" }

/**
 * The key text a listed Redis key was made from, or null. The inverse of `LockScripts.lockKey`'s
 * escaping, trusted only when `lockKey` maps the result back to the same Redis key.
 */
export const keyText = (namespace: string, redisKey: string): string | null => {
  const prefix = `${namespace}:{`
  if (!redisKey.startsWith(prefix) || !redisKey.endsWith("}")) return null
  const text = redisKey
    .slice(prefix.length, -1)
    .replace(/%25|%7B|%7D|%u[0-9A-F]{4}/g, (escape) =>
      escape.startsWith("%u") ? String.fromCharCode(Number.parseInt(escape.slice(2), 16)) : unescapes[escape]!
    )
  return LockScripts.lockKey(namespace, text) === redisKey ? text : null
}

export const report = (namespace: string, info: LockAdmin.LockInfo, key?: string): Report => ({
  key: key ?? keyText(namespace, info.key),
  redisKey: info.key,
  held: info.held,
  remainingMillis: info.remainingMillis ?? null,
  lastFencingToken: info.lastFencingToken ?? null,
  waiters: info.waiters
})

/**
 * Text as a terminal should show it: control characters (C0, DEL and C1), which in a key could
 * move the cursor, recolour the screen or split a table row, are written as escapes (`\n`, `\t`,
 * `\u001b`). Only the text output does this; `--json` keeps keys exact.
 */
export const printable = (text: string): string =>
  text.replace(/\p{Cc}/gu, (c) =>
    c === "\n" ? "\\n" : c === "\t" ? "\\t" : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`
  )

const remaining = (lock: Report): string =>
  !lock.held ? "-" : lock.remainingMillis === null ? "no expiry" : `${lock.remainingMillis} ms`

/** `inspect` for people. */
export const inspectText = (lock: Report): string =>
  [
    ["key", lock.key === null ? "?" : printable(lock.key)],
    ["redis key", printable(lock.redisKey)],
    ["held", lock.held ? "yes" : "no"],
    ["remaining TTL", remaining(lock)],
    ["last fencing token", lock.lastFencingToken === null ? "none" : String(lock.lastFencingToken)],
    ["waiters", String(lock.waiters)]
  ]
    .map(([label, value]) => `${`${label}:`.padEnd(20)}${value}`)
    .join("\n")

/** `list` for people: a table, then a count. */
export const listText = (namespace: string, locks: ReadonlyArray<Report>): string => {
  if (locks.length === 0) return `no locks in namespace "${namespace}"`
  const rows = [
    ["KEY", "HELD", "TTL", "FENCE", "WAITERS"],
    ...locks.map((lock) => [
      printable(lock.key ?? lock.redisKey),
      lock.held ? "yes" : "no",
      remaining(lock),
      lock.lastFencingToken === null ? "-" : String(lock.lastFencingToken),
      String(lock.waiters)
    ])
  ]
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  const table = rows.map((row) =>
    row
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join("  ")
      .trimEnd()
  )
  const held = locks.filter((lock) => lock.held).length
  const noun = locks.length === 1 ? "lock" : "locks"
  return [...table, `${locks.length} ${noun} in namespace "${namespace}", ${held} held`].join("\n")
}

/** `release` for people. */
export const releaseText = (key: string, redisKey: string, released: boolean): string =>
  released
    ? `released ${printable(key)} (${printable(redisKey)}): a holder still running loses it at its next renewal`
    : `${printable(key)} (${printable(redisKey)}) was not held: nothing released`

/** A semaphore as the `semaphore` commands report it. */
export interface SemaphoreReport {
  readonly key: string | null
  readonly redisKey: string
  readonly limit: number | null
  readonly used: number
  readonly holders: ReadonlyArray<{
    readonly token: string
    readonly permits: number
    readonly fencingToken: number | null
    readonly remainingMillis: number
  }>
  readonly waiters: ReadonlyArray<{ readonly id: string; readonly permits: number }>
  readonly lastFencingToken: number | null
}

export const semaphoreReport = (
  namespace: string,
  info: SemaphoreAdmin.SemaphoreInfo,
  key?: string
): SemaphoreReport => ({
  key: key ?? keyText(namespace, info.key),
  redisKey: info.key,
  limit: info.limit ?? null,
  used: info.used,
  holders: info.holders.map((holder) => ({ ...holder, fencingToken: holder.fencingToken ?? null })),
  waiters: info.waiters,
  lastFencingToken: info.lastFencingToken ?? null
})

/** Rows as an aligned table, each column as wide as its widest cell. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) =>
    row
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join("  ")
      .trimEnd()
  )
}

/** `semaphore inspect` for people: the summary, then the holders and the waiters in line. */
export const semaphoreText = (semaphore: SemaphoreReport): string => {
  const summary = [
    ["key", semaphore.key === null ? "?" : printable(semaphore.key)],
    ["redis key", printable(semaphore.redisKey)],
    ["limit", semaphore.limit === null ? "none stored (unused)" : String(semaphore.limit)],
    ["permits held", String(semaphore.used)],
    ["last fencing token", semaphore.lastFencingToken === null ? "none" : String(semaphore.lastFencingToken)]
  ].map(([label, value]) => `${`${label}:`.padEnd(20)}${value}`)
  const holders =
    semaphore.holders.length === 0
      ? ["no holders"]
      : table([
          ["HOLDER", "PERMITS", "FENCE", "TTL"],
          ...semaphore.holders.map((holder) => [
            printable(holder.token),
            String(holder.permits),
            holder.fencingToken === null ? "-" : String(holder.fencingToken),
            `${holder.remainingMillis} ms`
          ])
        ])
  const waiters =
    semaphore.waiters.length === 0
      ? ["nobody waiting"]
      : table([
          ["WAITER (in line)", "PERMITS"],
          ...semaphore.waiters.map((waiter) => [printable(waiter.id), String(waiter.permits)])
        ])
  return [...summary, "", ...holders, "", ...waiters].join("\n")
}

/** `semaphore list` for people. */
export const semaphoreListText = (namespace: string, semaphores: ReadonlyArray<SemaphoreReport>): string => {
  if (semaphores.length === 0) return `no semaphores in namespace "${namespace}"`
  const rows = table([
    ["KEY", "LIMIT", "HELD", "HOLDERS", "WAITERS", "FENCE"],
    ...semaphores.map((semaphore) => [
      printable(semaphore.key ?? semaphore.redisKey),
      semaphore.limit === null ? "-" : String(semaphore.limit),
      String(semaphore.used),
      String(semaphore.holders.length),
      String(semaphore.waiters.length),
      semaphore.lastFencingToken === null ? "-" : String(semaphore.lastFencingToken)
    ])
  ])
  const noun = semaphores.length === 1 ? "semaphore" : "semaphores"
  return [...rows, `${semaphores.length} ${noun} in namespace "${namespace}"`].join("\n")
}

/** `semaphore release` for people. */
export const permitsReleaseText = (key: string, holder: string, released: boolean): string =>
  released
    ? `released ${printable(holder)}'s permits of ${printable(key)}: the line was served with them; ` +
      "a holder still running loses them at its next renewal"
    : `${printable(holder)} held no permits of ${printable(key)}: nothing released`
