// What the demo's parent and its worker processes say to each other: the worker's parameters (one JSON
// argument) and the events a worker writes to stdout, one JSON object a line.
import * as Schema from "effect/Schema"

/** The deployments the demo runs on (`--topology`, `DEMO_TOPOLOGY`). */
export const topologies = ["standalone", "cluster", "sentinel"] as const
export type Topology = (typeof topologies)[number]

/** How to reach the servers: the parent describes them once, every worker builds its own clients. */
export const Connection = Schema.Union([
  Schema.TaggedStruct("standalone", { url: Schema.String }),
  /** Some nodes of the cluster (redis:// URLs); the clients discover the rest. */
  Schema.TaggedStruct("cluster", { rootUrls: Schema.Array(Schema.String) }),
  /** The master name the sentinels monitor and some of the sentinels. */
  Schema.TaggedStruct("sentinel", {
    masterName: Schema.String,
    sentinels: Schema.Array(Schema.Struct({ host: Schema.String, port: Schema.Int }))
  })
])
export type Connection = typeof Connection.Type

/** A connection for messages: the URL(s), or the master name and sentinels. */
export const describeConnection = (connection: Connection): string => {
  switch (connection._tag) {
    case "standalone":
      return connection.url
    case "cluster":
      return `cluster via ${connection.rootUrls.join(", ")}`
    case "sentinel":
      return `sentinel master "${connection.masterName}" via ${connection.sentinels
        .map(({ host, port }) => `${host}:${port}`)
        .join(", ")}`
  }
}

/**
 * Microseconds on the host's monotonic clock (`process.hrtime`, CLOCK_MONOTONIC on Linux). Every process
 * on the host reads the same clock, so the body intervals the workers report can be compared with each
 * other and with the parent's kill; a wall clock could step in between.
 */
export const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n)

/** Everything a worker needs, passed as `node worker.ts '<json>'`. */
export const WorkerParams = Schema.Struct({
  /** 1-based worker number, used in every event and in the output. */
  worker: Schema.Int,
  connection: Connection,
  namespace: Schema.String,
  lockKey: Schema.String,
  balanceKey: Schema.String,
  /** The mark the parent sets midway: the next holder to take it makes a slow deposit. */
  slowKey: Schema.String,
  deposits: Schema.Int,
  leaseMillis: Schema.Int,
  waitTimeoutMillis: Schema.Int,
  /** false runs the body without the lock: the control experiment, which loses updates. */
  useLock: Schema.Boolean,
  /** How long a normal body sleeps between GET and SET, widening the race window. */
  bodyMillis: Schema.Int,
  /** How long the marked body sleeps instead, so that the parent's SIGKILL lands inside it. */
  slowMillis: Schema.Int
})
export type WorkerParams = typeof WorkerParams.Type

export const WorkerParamsJson = Schema.fromJsonString(WorkerParams)

const base = { worker: Schema.Int, deposit: Schema.Int }

/**
 * One line of a worker's stdout. `deposited` is written only after SET returned. `acquired.enteredAt`
 * is the first thing a body does and `left.leftAt` its last (also when it fails or is interrupted),
 * both in `monotonicMicros`, so the parent can check that no two bodies overlapped.
 */
export const WorkerEvent = Schema.Union([
  Schema.TaggedStruct("ready", { worker: Schema.Int, pid: Schema.Int }),
  Schema.TaggedStruct("acquired", {
    ...base,
    waitMillis: Schema.Finite,
    slow: Schema.Boolean,
    enteredAt: Schema.Finite
  }),
  Schema.TaggedStruct("deposited", { ...base, balance: Schema.Int }),
  Schema.TaggedStruct("left", { ...base, leftAt: Schema.Finite }),
  Schema.TaggedStruct("released", { ...base, heldMillis: Schema.Finite }),
  Schema.TaggedStruct("lost", { ...base, phase: Schema.String, reason: Schema.String }),
  Schema.TaggedStruct("timedOut", { ...base, waitedMillis: Schema.Finite }),
  Schema.TaggedStruct("failed", { ...base, error: Schema.String, message: Schema.String }),
  Schema.TaggedStruct("done", { worker: Schema.Int, deposits: Schema.Int })
])
export type WorkerEvent = typeof WorkerEvent.Type

/** Decodes one stdout line; anything else (a stray log line) is `None`. */
export const decodeEvent = Schema.decodeUnknownOption(Schema.fromJsonString(WorkerEvent))

/** Encodes one event as a stdout line (without the newline). */
export const encodeEvent = (event: WorkerEvent): string => JSON.stringify(event)
