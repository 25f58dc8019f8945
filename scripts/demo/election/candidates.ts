// Starting, signalling and stopping the election demo's candidate processes. Each candidate is a
// scoped resource: closing the scope (normal end, failure or Ctrl-C) kills one still running, also a
// frozen one. Everything the candidates report lands in one shared log, in arrival order.
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import { type CandidateEvent, type CandidateParams, CandidateParamsJson, decodeEvent, resignLine } from "./events.ts"

/** One event and the candidate that reported it. */
export interface Heard {
  readonly candidate: string
  readonly event: CandidateEvent
}

/** A running candidate process. */
export interface CandidateProcess {
  readonly candidate: string
  readonly pid: number
  /** Whether the process has exited (its output is drained by then). */
  readonly exited: () => boolean
  readonly signal: (signal: NodeJS.Signals) => Effect.Effect<void>
  /** Asks the current leader to step down. */
  readonly resign: Effect.Effect<void>
  /** Closes stdin (the candidate stops itself, resigning a held lead) and waits for the exit, SIGKILL after `graceMillis`. */
  readonly stop: (graceMillis: number) => Effect.Effect<void>
}

const candidatePath = fileURLToPath(new URL("./candidate.ts", import.meta.url))

/** Resolves when `child` has exited, or after `millis` (then false). */
const exitWithin = (child: ChildProcess.ChildProcess, millis: number): Promise<boolean> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(true)
    const timer = setTimeout(() => resolve(false), millis)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve(true)
    })
  })

/** SIGKILL, which also ends a frozen (SIGSTOPped) candidate, and waits a little for the exit. */
const kill = async (child: ChildProcess.ChildProcess): Promise<void> => {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill("SIGKILL")
  await exitWithin(child, 2_000)
}

const launch = (
  params: CandidateParams,
  log: Array<Heard>,
  onEvent: (heard: Heard) => void,
  onOutput: (line: string) => void
): ChildProcess.ChildProcess => {
  const child = ChildProcess.spawn(
    process.execPath,
    [...process.execArgv, candidatePath, Schema.encodeSync(CandidateParamsJson)(params)],
    // stdin carries `resign` lines and is the lifeline: the candidate stops itself when it closes.
    { stdio: ["pipe", "pipe", "inherit"] }
  )
  child.stdin?.on("error", () => {})
  if (child.stdout !== null) {
    Readline.createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) =>
      Option.match(decodeEvent(line), {
        onNone: () => onOutput(line),
        onSome: (event) => {
          const heard = { candidate: params.candidate, event }
          log.push(heard)
          onEvent(heard)
        }
      })
    )
  }
  return child
}

/** Starts candidate `params.candidate`; it is killed when the scope closes, if still running. */
export const spawn = (
  params: CandidateParams,
  log: Array<Heard>,
  onEvent: (heard: Heard) => void,
  onOutput: (line: string) => void
): Effect.Effect<CandidateProcess, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = launch(params, log, onEvent, onOutput)
      let closed = false
      child.once("close", () => (closed = true))
      return { child, closed: () => closed }
    }),
    ({ child }) => Effect.promise(() => kill(child))
  ).pipe(
    Effect.map(({ child, closed }): CandidateProcess => ({
      candidate: params.candidate,
      pid: child.pid ?? -1,
      exited: closed,
      signal: (signal) =>
        Effect.sync(() => {
          child.kill(signal)
        }),
      resign: Effect.sync(() => {
        child.stdin?.write(`${resignLine}\n`)
      }),
      stop: (graceMillis) =>
        Effect.promise(async () => {
          child.stdin?.end()
          if (!(await exitWithin(child, graceMillis))) await kill(child)
        })
    }))
  )
