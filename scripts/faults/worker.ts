// One fault-matrix worker process: `fibers` fibers that each loop `withLock(random key)` (or, in a
// semaphore cell, `Semaphore.withPermits(random key, { limit, permits })` with 1 or 2 permits drawn at
// random) around a body that only records when it entered (with its grant's fencing token) and left,
// until the parent writes "stop" on stdin. Every step is one JSON line on stdout (see protocol.ts);
// the parent's checker decides what they mean.
// Started by run.ts as `node --conditions=@sage/source faults/worker.ts '<WorkerParams json>'`.
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Net from "node:net"
import { NodeRuntime } from "@effect/platform-node"
import { Lease, Lock, type LockBackend, type LockError, Semaphore } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import {
  type Connection,
  monotonicMicros,
  type Outcome,
  type WorkerLine,
  type WorkerParams,
  WorkerParamsJson
} from "./protocol.ts"

// Pipe writes are synchronous on Linux: a line written before a SIGKILL or SIGSTOP reaches the parent.
const emit = (line: WorkerLine): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`)
}

/** Set by the parent's "stop": each fiber finishes its current call and ends its loop. */
const control = { stopping: false }
let startResolve: () => void = () => {}
const started = new Promise<void>((resolve) => (startResolve = resolve))

const gone = (): void => {
  process.kill(process.pid, "SIGTERM")
}

/** "start" lets the fibers run, "stop" ends their loops; a closed stdin (parent gone) stops the process. */
const listenToParent = (): void => {
  let received = ""
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (chunk: string) => {
    received += chunk
    if (received.includes("start\n")) startResolve()
    if (received.includes("stop\n")) control.stopping = true
  })
  process.stdin.on("end", gone)
  process.stdin.on("error", gone)
  if (process.stdin instanceof Net.Socket) process.stdin.unref()
}

const backendLayer = (
  connection: Connection,
  auth: WorkerParams["auth"]
): Layer.Layer<LockBackend.LockBackend, LockError.LockRedisError | LockError.InvalidArgument> => {
  const credentials = auth === undefined ? {} : { username: auth.username, password: auth.password }
  switch (connection._tag) {
    case "standalone":
      return NodeRedisBackend.layer({ url: connection.url, ...credentials })
    case "sentinel":
      return NodeRedisBackend.layerSentinel({
        name: connection.masterName,
        sentinels: connection.sentinels,
        nodeClientOptions: credentials
      })
    case "cluster": {
      const map = connection.addressMap
      return NodeRedisBackend.layerCluster({
        rootNodes: connection.rootUrls.map((url) => ({ url })),
        defaults: credentials,
        ...(map === undefined ? {} : { nodeAddressMap: (address: string) => map[address] ?? undefined })
      })
    }
  }
}

/** A TimedOut's last server error, when it has one: what kept the lock unavailable. */
const lastErrorOf = (error: Record<string, unknown>): string => {
  const last = error["lastError"] as Record<string, unknown> | undefined
  return last === undefined ? "" : ` (last: ${String(last["code"])}: ${String(last["reply"]).slice(0, 120)})`
}

const detailOf = (error: { readonly _tag: string } & Record<string, unknown>): string => {
  switch (error._tag) {
    case "LockLost":
      return `${String(error["phase"])}/${String(error["reason"])}`
    case "TimedOut":
      // reason, attempts made, what the error says was waited: attempts 0 means the in-process turn never came.
      return `${String(error["reason"])}/${String(error["attempts"])}/${String(error["waitedMillis"])}ms${lastErrorOf(error)}`
    case "LockRedisError":
      return `${String(error["code"])}: ${String(error["command"])}: ${String(error["reply"]).slice(0, 160)}`
    case "InvalidArgument":
      return String(error["field"])
    default:
      return ""
  }
}

const describeHandle = (handle: unknown): string => {
  const socket = handle as { remotePort?: number; constructor?: { name?: string } }
  return `${socket.constructor?.name ?? "?"}${socket.remotePort === undefined ? "" : `:${socket.remotePort}`}`
}

/** Runs a body under the key's lock, or under `permits` of the key's semaphore. */
type Guard = (
  key: string,
  permits: number
) => <A, E>(body: Effect.Effect<A, E, Lease.Lease>) => Effect.Effect<A, E | LockError.LockError>

const program = Effect.gen(function* () {
  listenToParent()
  const params = yield* Schema.decodeUnknownEffect(WorkerParamsJson)(process.argv[2])
  const semaphore = params.semaphore
  const run = (guard: Guard) =>
    Effect.gen(function* () {
      emit(["ready", process.pid])
      yield* Effect.promise(() => started)

      const fiber = (f: number) =>
        Effect.gen(function* () {
          for (let n = 0; !control.stopping; n++) {
            const call = `${params.worker}.${f}.${n}`
            const key = params.keys[Math.floor(Math.random() * params.keys.length)] ?? "k"
            const bodyMillis =
              // Once stopping, no new long body: the run ends sooner and every long body began under the fault.
              Math.random() < params.longBodyShare && !control.stopping
                ? params.longBodyMillis
                : params.bodyMinMillis + Math.floor(Math.random() * (params.bodyMaxMillis - params.bodyMinMillis + 1))
            // The entry time is read before the token so that it stays the first thing the body does.
            const body = Effect.sync(monotonicMicros).pipe(
              Effect.flatMap((t) => Effect.map(Lease.fencingToken, (token) => emit(["E", call, t, bodyMillis, token]))),
              Effect.andThen(Effect.sleep(bodyMillis)),
              Effect.ensuring(Effect.sync(() => emit(["L", call, monotonicMicros()])))
            )
            // Two permits now and then, so that the line's order matters: a call for two at the head
            // keeps calls for one behind it waiting while a single permit is free.
            const permits = semaphore !== undefined && Math.random() < semaphore.doubleShare ? 2 : 1
            emit(
              semaphore === undefined
                ? ["B", call, key, monotonicMicros()]
                : ["B", call, key, monotonicMicros(), permits, semaphore.limit]
            )
            const exit = yield* Effect.exit(guard(key, permits)(body))
            let outcome: Outcome = "ok"
            let detail = ""
            if (exit._tag === "Failure") {
              const error = Cause.findErrorOption(exit.cause)
              if (error._tag === "Some") {
                outcome = error.value._tag
                detail = detailOf(error.value as unknown as { readonly _tag: string } & Record<string, unknown>)
              } else {
                outcome = "defect"
                detail = Cause.pretty(exit.cause).split("\n")[0] ?? ""
              }
            }
            emit(["X", call, monotonicMicros(), outcome, detail])
            // A little work outside the lock, so other fibers and processes get turns.
            yield* Effect.sleep(Math.floor(Math.random() * 20))
          }
        })
      yield* Effect.forEach(
        Array.from({ length: params.fibers }, (_, f) => f),
        fiber,
        { concurrency: "unbounded", discard: true }
      )
      emit(["done"])
    })
  const clientOptions = {
    leaseDuration: params.leaseMillis,
    namespace: params.namespace,
    replicaAcknowledgement: params.replicaAcknowledgement
  }
  const backend = backendLayer(params.connection, params.auth)
  const waitTimeout = params.waitTimeoutMillis
  const guarded =
    semaphore === undefined
      ? Effect.gen(function* () {
          const lock = yield* Lock.Lock
          yield* run((key) => lock.withLock(key, { waitTimeout }))
        }).pipe(Effect.provide(Lock.layer(clientOptions).pipe(Layer.provide(backend))))
      : Effect.gen(function* () {
          const semaphores = yield* Semaphore.Semaphore
          const limit = semaphore.limit
          yield* run((key, permits) => semaphores.withPermits(key, { limit, permits, waitTimeout }))
        }).pipe(Effect.provide(Semaphore.layer(clientOptions).pipe(Layer.provide(backend))))
  yield* guarded.pipe(
    Effect.tapCause((cause) => Effect.sync(() => emit(["fatal", Cause.pretty(cause).split("\n")[0] ?? "fatal"])))
  )
  // The lock layer (and its connections) is closed now; the process should exit by itself.
  emit(["closed"])
  {
    // Says what keeps the process alive if it does not exit: the parent reports it with the failure.
    setTimeout(() => {
      const handles = (process as unknown as { _getActiveHandles: () => Array<unknown> })._getActiveHandles()
      process.stderr.write(`still alive 2 s after closing: ${handles.map(describeHandle).join(", ")}\n`)
    }, 2000).unref()
  }
})

NodeRuntime.runMain(Effect.scoped(program), { disableErrorReporting: true })
