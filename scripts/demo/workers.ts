// Starting, signalling and stopping the demo's worker processes. Each worker is a scoped resource:
// closing the scope (normal end, failure or Ctrl-C) sends SIGTERM, then SIGKILL after a grace period,
// and waits for the exit. Everything a worker says arrives on one queue, in order.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import { decodeEvent, type WorkerEvent, type WorkerParams, WorkerParamsJson } from "./protocol.ts"

/** What the parent hears from its workers. */
export type Message =
  | { readonly _tag: "Event"; readonly event: WorkerEvent }
  | { readonly _tag: "Output"; readonly worker: number; readonly line: string }
  | {
      readonly _tag: "Exited"
      readonly worker: number
      readonly code: number | null
      readonly signal: NodeJS.Signals | null
    }

/** A running worker process. */
export interface WorkerProcess {
  readonly worker: number
  readonly pid: number
  /** Lets a worker that reported `ready` begin its deposits. */
  readonly start: Effect.Effect<void>
  /** SIGKILL now: no finalizer runs, nothing is released; the lock frees itself when its lease ends. */
  readonly kill: Effect.Effect<void>
}

export class SpawnError extends Data.TaggedError("SpawnError")<{ readonly worker: number; readonly message: string }> {}

const workerPath = fileURLToPath(new URL("./worker.ts", import.meta.url))
const graceMillis = 3_000

/** SIGTERM (the worker interrupts itself and releases a held lock), SIGKILL after the grace period. */
const stop = (child: ChildProcess.ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return resolve()
    const escalate = setTimeout(() => child.kill("SIGKILL"), graceMillis)
    const giveUp = setTimeout(resolve, graceMillis + 2_000)
    child.once("exit", () => {
      clearTimeout(escalate)
      clearTimeout(giveUp)
      resolve()
    })
    child.kill("SIGTERM")
  })

const launch = (params: WorkerParams, messages: Queue.Queue<Message>): ChildProcess.ChildProcess => {
  const { worker } = params
  const child = ChildProcess.spawn(
    process.execPath,
    [...process.execArgv, workerPath, Schema.encodeSync(WorkerParamsJson)(params)],
    // stdin stays open as a lifeline: the worker stops itself when it closes (see worker.ts).
    { stdio: ["pipe", "pipe", "inherit"] }
  )
  child.stdin?.on("error", () => {})
  let exited = false
  const exit = (code: number | null, signal: NodeJS.Signals | null): void => {
    if (exited) return
    exited = true
    Queue.offerUnsafe(messages, { _tag: "Exited", worker, code, signal })
  }
  if (child.stdout !== null) {
    Readline.createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
      const message: Message = Option.match(decodeEvent(line), {
        onNone: () => ({ _tag: "Output", worker, line }),
        onSome: (event) => ({ _tag: "Event", event })
      })
      Queue.offerUnsafe(messages, message)
    })
  }
  // "close" comes after stdout is drained, so no event is reported after the exit.
  child.once("close", exit)
  child.once("error", (error) => {
    if (child.pid !== undefined) return
    Queue.offerUnsafe(messages, { _tag: "Output", worker, line: `could not start: ${error.message}` })
    exit(null, null)
  })
  return child
}

/** Starts worker `params.worker`; it is stopped when the scope closes. */
export const spawn = (
  params: WorkerParams,
  messages: Queue.Queue<Message>
): Effect.Effect<WorkerProcess, SpawnError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => launch(params, messages),
      catch: (cause) => new SpawnError({ worker: params.worker, message: String(cause) })
    }),
    (child) => Effect.promise(() => stop(child))
  ).pipe(
    Effect.map((child): WorkerProcess => ({
      worker: params.worker,
      pid: child.pid ?? -1,
      start: Effect.sync(() => {
        child.stdin?.write("start\n")
      }),
      kill: Effect.sync(() => {
        child.kill("SIGKILL")
      })
    }))
  )
