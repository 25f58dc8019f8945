// One candidate process of the election demo. It campaigns with `Election.run` under its candidate
// id and proclaims its pid; while it leads, it writes the shared key every `workEveryMillis`, each
// write after `lease.ensure` and fenced by its term, and reports every step as a JSON line on stdout
// (events.ts). A `resign` line on stdin makes the current leader step down; stdin closing stops the
// process as SIGTERM does, which hands a held lead over at once instead of leaving it to expire.
// Started by main.ts; runnable by hand as
// `node --conditions=@sage/source demo/election/candidate.ts '<CandidateParams json>'`.
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Readline from "node:readline"
import { NodeRuntime } from "@effect/platform-node"
import { Election, type Leadership, type LockError } from "@sage/lock"
import { FencedWrite } from "@sage/lock-node-redis"
import { monotonicMicros } from "../protocol.ts"
import * as Connections from "./connections.ts"
import { type CandidateEvent, type CandidateParams, CandidateParamsJson, encodeEvent, resignLine } from "./events.ts"

// Pipe writes are synchronous on Linux, so an event written before a SIGKILL or SIGSTOP reaches the parent.
const emit = (event: CandidateEvent): Effect.Effect<void> =>
  Effect.sync(() => {
    process.stdout.write(`${encodeEvent(event)}\n`)
  })

const stopSelf = (): void => {
  process.kill(process.pid, "SIGTERM")
}

/** Hears the parent: each `resign` line goes to `resigns`; stdin closing stops this process. */
const listen = (resigns: Queue.Queue<void>): Effect.Effect<void> =>
  Effect.sync(() => {
    Readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
      .on("line", (line) => {
        if (line.trim() === resignLine) Queue.offerUnsafe(resigns, undefined)
      })
      .on("close", stopSelf)
    process.stdin.on("error", stopSelf)
    // A parent gone (its end of stdout closed) cannot be reported to: stop as well.
    process.stdout.on("error", stopSelf)
  })

/** How a term's work stopped: interrupted (resigned, lost, stopped) or the failure's tag. */
const howItEnded = (exit: Exit.Exit<void, LockError.LockLost>): string =>
  Option.match(Exit.findErrorOption(exit), {
    onNone: () => (Exit.isSuccess(exit) ? "returned" : "interrupted"),
    onSome: (error) => error._tag
  })

/** The lead this process holds now, for `resign` lines. */
interface Current {
  leadership: Leadership.Leadership | undefined
}

/** A leader's work: fenced writes of the shared key until the lead ends, each reported. */
const work =
  (params: CandidateParams, client: FencedWrite.Client, current: Current) =>
  (leadership: Leadership.Leadership): Effect.Effect<void, LockError.LockLost> => {
    const { term } = leadership
    const write = (n: number) =>
      Effect.gen(function* () {
        yield* leadership.lease.ensure
        const at = monotonicMicros()
        const value = `${params.candidate} term ${term} write ${n}`
        const outcome = yield* Effect.result(
          FencedWrite.set(client, { key: params.workKey, value, fencingToken: term })
        )
        yield* emit(
          Result.isSuccess(outcome)
            ? { t: "work", term, at, ok: outcome.success._tag === "Written" }
            : { t: "error", term, at, message: outcome.failure.message }
        )
      })
    return Effect.gen(function* () {
      current.leadership = leadership
      yield* emit({ t: "lead", term, at: monotonicMicros() })
      for (let n = 1; ; n++) {
        yield* write(n)
        yield* Effect.sleep(params.workEveryMillis)
      }
    }).pipe(
      Effect.onExit((exit) =>
        Effect.suspend(() => {
          if (current.leadership === leadership) current.leadership = undefined
          return emit({ t: "end", term, at: monotonicMicros(), how: howItEnded(exit) })
        })
      )
    )
  }

/**
 * The candidate's life: connect, campaign and lead until stopped. Its scope closes inside the
 * backend's layer, so a held lead is released before the backend closes.
 */
const candidate = (params: CandidateParams) =>
  Effect.gen(function* () {
    const store = yield* Connections.connect(params.connection)
    const elections = yield* Election.make({
      namespace: params.namespace,
      leaseDuration: params.leaseMillis,
      candidate: params.candidate
    })
    const current: Current = { leadership: undefined }
    const resigns = yield* Queue.unbounded<void>()
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.andThen(
          Queue.take(resigns),
          Effect.suspend(() => current.leadership?.resign ?? Effect.void)
        )
      )
    )
    yield* listen(resigns)
    return yield* elections.run(params.election, work(params, store.fenced(params.workKey), current), {
      value: String(process.pid),
      rejoinDelay: params.rejoinMillis
    })
  }).pipe(Effect.scoped, Effect.provide(Connections.backendLayer(params.connection)))

const program = Effect.flatMap(Schema.decodeUnknownEffect(CandidateParamsJson)(process.argv[2]), candidate)

program.pipe(NodeRuntime.runMain)
