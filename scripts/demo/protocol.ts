// What the demo's parent and its worker processes say to each other: the worker's parameters (one JSON
// argument) and the events a worker writes to stdout, one JSON object a line.
import * as Schema from "effect/Schema"

/** Everything a worker needs, passed as `node worker.ts '<json>'`. */
export const WorkerParams = Schema.Struct({
  /** 1-based worker number, used in every event and in the output. */
  worker: Schema.Int,
  url: Schema.String,
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

/** One line of a worker's stdout. `deposited` is written only after SET returned. */
export const WorkerEvent = Schema.Union([
  Schema.TaggedStruct("ready", { worker: Schema.Int, pid: Schema.Int }),
  Schema.TaggedStruct("acquired", { ...base, waitMillis: Schema.Finite, slow: Schema.Boolean }),
  Schema.TaggedStruct("deposited", { ...base, balance: Schema.Int }),
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
