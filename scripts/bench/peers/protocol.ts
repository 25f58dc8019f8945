// What the peers bench's parent and its worker processes say to each other: the worker's identity (one
// JSON argument), the parent's commands on stdin and the worker's messages on stdout, one JSON object a
// line. Every timestamp is on `clockMillis` (clock.ts), so records of different
// processes can be merged into one timeline. Workers import only this module's types: loading Schema
// would add a few hundred milliseconds to every worker's start.
import * as Schema from "effect/Schema"

/**
 * The libraries the bench compares; `baseline` is the hand-written node-redis lock, and `protocol`
 * the same loop with @sage/lock's scripts (protocolFloor.ts), the floor of what the lock could reach.
 * `sage-ioredis` is @sage/lock over `@sage/lock-ioredis`, on the client redlock and redis-semaphore use.
 */
export const libraries = ["sage", "sage-ioredis", "redlock", "sesame", "semaphore", "protocol", "baseline"] as const
export type Library = (typeof libraries)[number]

/** How the tables name each library. */
export const libraryLabel: Record<Library, string> = {
  sage: "@sage/lock",
  "sage-ioredis": "@sage/lock over ioredis",
  redlock: "redlock 5",
  sesame: "@sesamecare-oss/redlock",
  semaphore: "redis-semaphore Mutex",
  protocol: "baseline, @sage/lock's scripts",
  baseline: "node-redis baseline"
}

/**
 * A semaphore's size, for the semaphores bench (bench/semaphores), which runs these workloads with
 * `withPermits(key, 1 of limit)` in place of `withLock(key)`; absent for a lock.
 */
const limit = Schema.optional(Schema.Int)

/** The work one process does between the parent's `start` and its `until`. */
export const Workload = Schema.Union([
  /** `concurrency` loops, each on its own key, doing `withLock(key)(nothing)` back to back. */
  Schema.TaggedStruct("uncontended", { concurrency: Schema.Int, warmupMillis: Schema.Int, limit }),
  /** Loops on one shared key; `workers` are their global ids (the other processes run the rest). */
  Schema.TaggedStruct("contended", {
    key: Schema.String,
    workers: Schema.Array(Schema.Int),
    holdMillis: Schema.Finite,
    thinkMillis: Schema.Finite,
    warmupCycles: Schema.Int,
    limit
  }),
  /**
   * `count` locks acquired together, held `holdMillis` once all are held, then released. With a
   * `limit`, `limit` holders share each key, so that every one of them is granted at once.
   */
  Schema.TaggedStruct("held", { count: Schema.Int, holdMillis: Schema.Int, acquireBudgetMillis: Schema.Int, limit })
])
export type Workload = typeof Workload.Type

/**
 * A worker's identity for its whole life, passed as `node worker.ts '<json>'`: a peers `Library`, or,
 * with `drivers` (the URL of a module whose `load` is a drivers.ts `Load`), a library that module knows.
 */
export const WorkerArgs = Schema.Struct({
  library: Schema.String,
  url: Schema.String,
  drivers: Schema.optional(Schema.String)
})
export type WorkerArgs = typeof WorkerArgs.Type
export const WorkerArgsJson = Schema.fromJsonString(WorkerArgs)

/** One run of a workload in one worker process. */
export interface Job {
  /** Prefix of every key the run uses, so runs never meet each other's leftovers. */
  readonly namespace: string
  readonly leaseMillis: number
  readonly workload: Workload
}

/**
 * What the parent writes to a worker's stdin, one JSON object a line: `prepare` (connect if needed, warm
 * up on private keys, answer `ready`), then `start` (run in the window on `clockMillis`, answer
 * `result`; the held workload ignores `until`). When stdin ends the worker closes its clients and exits.
 */
export type Command =
  | { readonly _tag: "prepare"; readonly job: Job }
  | { readonly _tag: "start"; readonly from: number; readonly until: number }

/** One acquisition: `[worker, requested, acquired, released]`; released is when the body ended. */
export type AcquisitionRecord = readonly [number, number, number, number]

export const Result = Schema.Union([
  Schema.TaggedStruct("uncontended", {
    cycles: Schema.Int,
    elapsedMillis: Schema.Finite,
    cpuMicros: Schema.Finite,
    /** Garbage collection in the window (gc.ts): the collector's time, and full collections. */
    gcMillis: Schema.Finite,
    fullGcs: Schema.Int,
    /** Calls that timed out or reported a loss: none expected. */
    failures: Schema.Int
  }),
  Schema.TaggedStruct("contended", {
    records: Schema.Array(Schema.Tuple([Schema.Int, Schema.Finite, Schema.Finite, Schema.Finite])),
    /** Requests this process sent during its loops (requests.ts). */
    requests: Schema.Int,
    cpuMicros: Schema.Finite,
    lost: Schema.Int
  }),
  Schema.TaggedStruct("held", {
    requested: Schema.Int,
    acquired: Schema.Int,
    /** From start until every lock was held (or the budget ran out). */
    acquireMillis: Schema.Finite,
    /** The window measured for CPU: all locks held, nothing else happening but renewal. */
    holdMillis: Schema.Finite,
    cpuMicros: Schema.Finite,
    /** Garbage collection in that window (gc.ts): the collector's time, and full collections. */
    gcMillis: Schema.Finite,
    fullGcs: Schema.Int,
    /** Heap in use once all were held, less the heap before the first acquisition (both after a full collection). */
    heapBytes: Schema.Finite,
    /** CPU of the full collection right after all were held, before the window (drivers.ts `collectGarbage`). */
    collectMicros: Schema.Finite,
    lost: Schema.Int
  })
])
export type Result = typeof Result.Type

export const Message = Schema.Union([
  Schema.TaggedStruct("ready", { pid: Schema.Int }),
  Schema.TaggedStruct("result", { result: Result }),
  Schema.TaggedStruct("failed", { message: Schema.String })
])
export type Message = typeof Message.Type

/** Decodes one stdout line; anything else (a stray log line from a library) is `None`. */
export const decodeMessage = Schema.decodeUnknownOption(Schema.fromJsonString(Message))
