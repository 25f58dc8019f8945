// What the parent reads from the servers around a cell, apart from the workers' lines:
// - the servers' clock against the host's monotonic clock, so the checker can place a fencing token
//   (the granting server's `TIME` in microseconds, docs/fencing.md) on the workers' timeline;
// - after the run, with every worker gone and every lease and waiter registration past its lifetime,
//   what is left of the locks: lock keys and waiter registrations (`<lock key>:waiters`,
//   `<lock key>:waiting`, docs/admin.md); of a semaphore, its holders (`<key>`), `<key>:permits`, and
//   its registrations (those two queues and `<key>:asks`, SemaphoreScripts.ts). All must be gone by
//   then (only fence keys stay, on purpose, and an election's leader record `<key>:leader`, kept seven
//   days like the fence key, ElectionScripts.ts): anything left is stranded.
import * as Effect from "effect/Effect"
import { createClient } from "redis"
import { ElectionScripts, LockScripts, SemaphoreScripts } from "@sage/lock"
import type { RedisServer, TestkitError } from "@sage/lock-testkit"
import { type Deployment, settledMasterFor } from "./deployments.ts"
import type { ClockOffset } from "./history.ts"
import { monotonicMicros } from "./protocol.ts"

/**
 * How long a waiter's registration lasts without a refresh, for a lease: two backoff caps
 * (`min(1 s, lease / 5)`, at least 20 ms) plus half a second (docs/semantics.md, "A dead waiter").
 */
export const registrationLifetimeMillis = (leaseMillis: number): number =>
  2 * Math.min(1000, Math.max(20, leaseMillis / 5)) + 500

/**
 * `TIME` on `server`, a few times on one connection, each between two monotonic readings: the
 * tightest pair bounds server time minus monotonic time. Every server of the matrix runs on this
 * host, so one offset serves them all; measured before and after a run, the two bound the clock's
 * drift too.
 */
const measureOffset = (server: RedisServer.RedisServer): Effect.Effect<ClockOffset | undefined> =>
  Effect.promise(async (): Promise<ClockOffset | undefined> => {
    const client = createClient({
      socket: { host: server.host, port: server.port, connectTimeout: 1000, reconnectStrategy: false },
      RESP: 2,
      disableClientInfo: true
    })
    client.on("error", () => {})
    try {
      await client.connect()
      let best: { before: number; after: number; server: number } | undefined
      for (let i = 0; i < 5; i++) {
        const before = monotonicMicros()
        const reply = await client.sendCommand<Array<string>>(["TIME"])
        const after = monotonicMicros()
        const time = Number(reply[0]) * 1_000_000 + Number(reply[1])
        if (best === undefined || after - before < best.after - best.before) best = { before, after, server: time }
      }
      return best === undefined ? undefined : { low: best.server - best.after, high: best.server - best.before }
    } catch {
      return undefined
    } finally {
      client.destroy()
    }
  }).pipe(Effect.timeoutOrElse({ duration: 3000, orElse: () => Effect.succeed(undefined) }))

/**
 * How far the servers' wall clock moved against the monotonic one between two readings, in
 * milliseconds (positive: forward), from the middles of the two offsets; undefined without both.
 * Between the start and the end of a cell it is a fraction of a millisecond unless the host's clock
 * was stepped.
 */
export const clockStepMillis = (before: ClockOffset | undefined, after: ClockOffset | undefined): number | undefined =>
  before === undefined || after === undefined
    ? undefined
    : (after.low + after.high - before.low - before.high) / 2 / 1000

/** The union of two offsets (either may be missing). */
export const widen = (a: ClockOffset | undefined, b: ClockOffset | undefined): ClockOffset | undefined =>
  a === undefined ? b : b === undefined ? a : { low: Math.min(a.low, b.low), high: Math.max(a.high, b.high) }

/** The offset of the servers' clock, measured on the first data node that answers. */
export const clockOffset = (deployment: Deployment): Effect.Effect<ClockOffset | undefined> =>
  Effect.gen(function* () {
    for (const node of deployment.nodes) {
      const offset = yield* measureOffset(node)
      if (offset !== undefined) return offset
    }
    return undefined
  })

/** One member of a waiter queue (or field of a semaphore's asks), with the key's remaining TTL (-1: none). */
export interface Registration {
  readonly lock: string
  readonly queue: string
  readonly waiter: string
  readonly ttlMillis: number
}

/** What the cell's keys are: locks, semaphores, or elections (locks with a leader record each). */
export type KeyKind = "lock" | "semaphore" | "election"

export interface Leftovers {
  /**
   * Keys of the namespace other than fence keys and elections' leader records (both kept on
   * purpose) and waiter queues: lock keys, semaphores' holders and `:permits`, each with its type and
   * remaining TTL.
   */
  readonly keys: ReadonlyArray<string>
  /** Registrations left in waiter queues. */
  readonly registrations: ReadonlyArray<Registration>
  /** Reads that failed (then the others are incomplete). */
  readonly unreadable: ReadonlyArray<string>
}

const asStrings = (reply: unknown): Array<string> => (Array.isArray(reply) ? reply.map(String) : [])

interface Queue {
  readonly master: RedisServer.RedisServer
  readonly lock: string
  readonly key: string
  /** Its members: a sorted set's (`ZRANGE`) or a hash's fields (`HKEYS`, a semaphore's asks). */
  readonly read: "ZRANGE" | "HKEYS"
}

/** One read of every master that owns a lock or semaphore key now. */
const readLeftovers = (
  deployment: Deployment,
  namespace: string,
  redisKeys: ReadonlyArray<string>,
  kind: KeyKind
): Effect.Effect<Leftovers, TestkitError.TestkitError> =>
  Effect.gen(function* () {
    const masters = new Map<number, RedisServer.RedisServer>()
    const queues: Array<Queue> = []
    for (const key of redisKeys) {
      // Every key of a lock or semaphore shares its hash tag, so they live on its master.
      const master = yield* settledMasterFor(deployment, key)
      masters.set(master.port, master)
      if (kind === "semaphore") {
        const [, waiters, waiting, , , asks] = SemaphoreScripts.keysOf(key)
        queues.push(
          { master, lock: key, key: waiters, read: "ZRANGE" },
          { master, lock: key, key: waiting, read: "ZRANGE" },
          { master, lock: key, key: asks, read: "HKEYS" }
        )
      } else {
        const [, waiters, waiting] = LockScripts.keysOf(key)
        queues.push(
          { master, lock: key, key: waiters, read: "ZRANGE" },
          { master, lock: key, key: waiting, read: "ZRANGE" }
        )
      }
    }
    // Kept on purpose: the fence keys (the last token issued), and an election's leader record, which
    // is kept as long (ElectionScripts.recordRetentionMillis) and only read while its term holds the lock.
    const keptKeys = new Set([
      ...redisKeys.map((key) => LockScripts.fenceKey(key)),
      ...(kind === "election" ? redisKeys.map((key) => ElectionScripts.leaderKey(key)) : [])
    ])
    const queueKeys = new Set(queues.map((queue) => queue.key))
    const keys: Array<string> = []
    for (const master of masters.values()) {
      for (const key of asStrings(yield* master.commandWith({ timeoutMs: 2000 }, "KEYS", `${namespace}:*`))) {
        if (keptKeys.has(key) || queueKeys.has(key)) continue
        const [type, ttl] = yield* master.session([
          ["TYPE", key],
          ["PTTL", key]
        ])
        keys.push(`${key} (${String(type)}, TTL ${String(ttl)} ms)`)
      }
    }
    const registrations: Array<Registration> = []
    for (const { master, lock, key, read } of queues) {
      const [members, ttl] = yield* master.session([
        read === "ZRANGE" ? ["ZRANGE", key, "0", "-1"] : ["HKEYS", key],
        ["PTTL", key]
      ])
      for (const waiter of asStrings(members)) registrations.push({ lock, queue: key, waiter, ttlMillis: Number(ttl) })
    }
    return { keys: keys.toSorted(), registrations, unreadable: [] }
  })

/**
 * What is left of the locks once every lease and registration could have lapsed: read until nothing
 * is left or `withinMillis` has passed (nothing creates keys any more, so an empty read is final).
 */
export const leftovers = (
  deployment: Deployment,
  namespace: string,
  redisKeys: ReadonlyArray<string>,
  withinMillis: number,
  kind: KeyKind
): Effect.Effect<Leftovers> =>
  Effect.gen(function* () {
    const deadline = Date.now() + withinMillis
    for (;;) {
      const read = yield* Effect.result(readLeftovers(deployment, namespace, redisKeys, kind))
      const found: Leftovers =
        read._tag === "Success"
          ? read.success
          : { keys: [], registrations: [], unreadable: [read.failure.message.split("\n")[0] ?? "?"] }
      const empty = found.keys.length === 0 && found.registrations.length === 0 && found.unreadable.length === 0
      if (empty || Date.now() > deadline) return found
      yield* Effect.sleep(250)
    }
  })

/** How many waiters (distinct ids per lock or semaphore) are left registered. */
export const strandedWaiters = (leftovers: Leftovers): number =>
  new Set(leftovers.registrations.map((registration) => `${registration.lock} ${registration.waiter}`)).size

export const describeRegistration = (registration: Registration): string =>
  `${registration.queue} holds ${registration.waiter} (key TTL ${registration.ttlMillis} ms)`
