// What the election demo's observer process and its candidate processes say to each other: the
// candidate's parameters (one JSON argument), the lines the parent writes to a candidate's stdin, and
// the events a candidate writes to stdout, one JSON object a line. Times are `monotonicMicros`, the
// host's monotonic clock, so the parent can compare them across processes and with its own signals.
import * as Schema from "effect/Schema"
import { Connection } from "../protocol.ts"

/** Everything a candidate needs, passed as `node candidate.ts '<json>'`. */
export const CandidateParams = Schema.Struct({
  /** The candidate id observers see: "c1", "c2", "c3". */
  candidate: Schema.String,
  connection: Connection,
  namespace: Schema.String,
  /** The election's name. */
  election: Schema.String,
  /** The key every leader writes with its term as the fencing token. */
  workKey: Schema.String,
  leaseMillis: Schema.Int,
  rejoinMillis: Schema.Int,
  /** How long a leader waits between two writes. */
  workEveryMillis: Schema.Int
})
export type CandidateParams = typeof CandidateParams.Type

export const CandidateParamsJson = Schema.fromJsonString(CandidateParams)

/** What the parent writes to a candidate's stdin: the leader steps down. Closing stdin stops it. */
export const resignLine = "resign"

/**
 * One line of a candidate's stdout.
 * - `lead`: its work started in `term`.
 * - `work`: one fenced write, sent at `at` under a lease `ensure` accepted; `ok` is false when the
 *   fence rejected it (a later term had written).
 * - `error`: a write that got no answer or an error reply (it may or may not have been applied).
 * - `end`: its work for `term` stopped; `how` is "interrupted" (resigned, lost, or stopped) or the
 *   failure's tag (`LockLost` from `ensure`).
 */
export const CandidateEvent = Schema.Union([
  Schema.Struct({ t: Schema.Literal("lead"), term: Schema.Number, at: Schema.Number }),
  Schema.Struct({ t: Schema.Literal("work"), term: Schema.Number, at: Schema.Number, ok: Schema.Boolean }),
  Schema.Struct({ t: Schema.Literal("error"), term: Schema.Number, at: Schema.Number, message: Schema.String }),
  Schema.Struct({ t: Schema.Literal("end"), term: Schema.Number, at: Schema.Number, how: Schema.String })
])
export type CandidateEvent = typeof CandidateEvent.Type

/** Decodes one stdout line; anything else (a log line) is `None`. */
export const decodeEvent = Schema.decodeUnknownOption(Schema.fromJsonString(CandidateEvent))

/** Encodes one event as a stdout line (without the newline). */
export const encodeEvent = (event: CandidateEvent): string => JSON.stringify(event)
