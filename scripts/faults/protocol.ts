// What the fault matrix's parent and its worker processes say to each other: the worker's parameters
// (one JSON argument) and one JSON array a line on the worker's stdout for every step of every call.
// Times are microseconds on the host's monotonic clock (CLOCK_MONOTONIC through process.hrtime), which
// every process on the machine reads alike, so intervals from different workers and the parent's fault
// marks compare directly; a wall clock could step in between. Fencing tokens are the granting server's
// time in microseconds (docs/fencing.md): the parent measures that clock against the monotonic one
// (see serverState.ts) instead of the workers asking the server for the time around every grant.
import * as Schema from "effect/Schema"

/** How a worker reaches the deployment; each worker builds its own clients. */
export const Connection = Schema.Union([
  /** One server; `client` picks the backend (node-redis's when absent). */
  Schema.TaggedStruct("standalone", {
    url: Schema.String,
    client: Schema.optional(Schema.Literals(["node-redis", "ioredis"]))
  }),
  Schema.TaggedStruct("sentinel", {
    masterName: Schema.String,
    sentinels: Schema.Array(Schema.Struct({ host: Schema.String, port: Schema.Int })),
    /** The backend (node-redis's when absent). */
    client: Schema.optional(Schema.Literals(["node-redis", "ioredis"]))
  }),
  Schema.TaggedStruct("cluster", {
    rootUrls: Schema.Array(Schema.String),
    /** Announced `host:port` to the address to dial (a proxy in front of each node), if any. */
    addressMap: Schema.optional(Schema.Record(Schema.String, Schema.Struct({ host: Schema.String, port: Schema.Int }))),
    /** The backend (node-redis's when absent). */
    client: Schema.optional(Schema.Literals(["node-redis", "ioredis"]))
  })
])
export type Connection = typeof Connection.Type

export const WorkerParams = Schema.Struct({
  worker: Schema.Int,
  connection: Connection,
  namespace: Schema.String,
  /** The lock keys (key text, before the namespace) the fibers pick from at random. */
  keys: Schema.Array(Schema.String),
  fibers: Schema.Int,
  leaseMillis: Schema.Int,
  waitTimeoutMillis: Schema.Int,
  bodyMinMillis: Schema.Int,
  bodyMaxMillis: Schema.Int,
  /** A share (0..1) of bodies that run long instead (longBodyMillis), so that renewals happen inside bodies. */
  longBodyShare: Schema.Finite,
  longBodyMillis: Schema.Int,
  replicaAcknowledgement: Schema.Boolean,
  /**
   * What the fibers loop: `withLock` (absent), or `Semaphore.withPermits` with this limit, asking for
   * 2 permits with probability `doubleShare` and 1 otherwise.
   */
  semaphore: Schema.optional(Schema.Struct({ limit: Schema.Int, doubleShare: Schema.Finite })),
  /**
   * The fibers campaign for the keys as election names instead (`Election.campaign`, then
   * `leadership.lead(body)` and `resign`), and one observer fiber per key writes every state
   * `Election.observe` shows.
   */
  election: Schema.optional(Schema.Boolean),
  /** An ACL user for every connection (standalone and cluster). */
  auth: Schema.optional(Schema.Struct({ username: Schema.String, password: Schema.String }))
})
export type WorkerParams = typeof WorkerParams.Type
export const WorkerParamsJson = Schema.fromJsonString(WorkerParams)

/** `monotonicMicros` of this process: CLOCK_MONOTONIC, shared by every process on the host. */
export const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n)

/**
 * One stdout line of a worker, as a JSON array:
 * - `["ready", pid]` once its lock layer is built; `["fatal", message]` if it cannot be;
 * - `["B", call, key, t]` a `withLock` call begins, `["B", call, key, t, permits, limit]` a `withPermits` call
 *   (the permits it asks for, which its body holds, and the semaphore's limit); `["E", call, t, bodyMillis,
 *   fencingToken]` its body entered
 *   (first thing the body does), how long it will run and the grant's fencing token (`Lease.fencingToken`);
 *   `["L", call, t]` its body left (last thing, also when failed or interrupted);
 * - `["X", call, t, outcome, detail]` the call returned: outcome `ok`, `TimedOut`, `LockLost`,
 *   `LockRedisError`, `InvalidArgument` or `defect`; detail is the phase/reason or code;
 * - in an election cell, `["G", call, t, term]` the campaign returned: the call leads with that term (the
 *   grant's fencing token), before its body enters; `["O", key, t, term, revision, candidate]` the
 *   worker's observer of election `key` showed a leader (`term`, its record's `revision` and
 *   `candidate`), or nobody (`null`, `null`, `null`); `["OX", key, t, detail]` that observer's stream
 *   ended with a failure;
 * - `["done"]` after every fiber stopped; `["closed"]` once the lock layer (its connections) is closed.
 * `call` is `"<worker>.<fiber>.<n>"`, unique in the run; an election call's candidate is `"w<worker>-f<fiber>"`.
 */
export type WorkerLine =
  | readonly ["ready", number]
  | readonly ["fatal", string]
  | readonly ["B", string, string, number]
  | readonly ["B", string, string, number, number, number]
  | readonly ["E", string, number, number, number]
  | readonly ["L", string, number]
  | readonly ["X", string, number, Outcome, string]
  | readonly ["G", string, number, number]
  | readonly ["O", string, number, number | null, number | null, string | null]
  | readonly ["OX", string, number, string]
  | readonly ["done"]
  | readonly ["closed"]

export type Outcome = "ok" | "TimedOut" | "LockLost" | "LockRedisError" | "InvalidArgument" | "defect"

export const parseLine = (line: string): WorkerLine | undefined => {
  if (!line.startsWith("[")) return undefined
  try {
    const value: unknown = JSON.parse(line)
    return Array.isArray(value) && typeof value[0] === "string" ? (value as unknown as WorkerLine) : undefined
  } catch {
    return undefined
  }
}
