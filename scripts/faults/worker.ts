// One fault-matrix worker process: `fibers` fibers that each loop `withLock(random key)` (or, in a
// semaphore cell, `Semaphore.withPermits(random key, { limit, permits })` with 1 or 2 permits drawn at
// random; in an election cell, `Election.campaign(random key)` then `leadership.lead(body)` and
// `resign`) around a body that only records when it entered (with its grant's fencing token, an
// election's term) and left, until the parent writes "stop" on stdin. In an election cell one more
// fiber per key writes every state `Election.observe` shows. Every step is one JSON line on stdout
// (see protocol.ts); the parent's checker decides what they mean.
// Started by run.ts as `node --conditions=@sage/source faults/worker.ts '<WorkerParams json>'`.
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Net from "node:net"
import { NodeRuntime } from "@effect/platform-node"
import { Election, Lease, type Leadership, Lock, type LockBackend, type LockError, Semaphore } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import { IoredisBackend } from "@sage/lock-ioredis"
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
      if (connection.client === "ioredis") {
        const { hostname, port } = new URL(connection.url)
        return IoredisBackend.layer({ host: hostname, port: Number(port), ...credentials })
      }
      return NodeRedisBackend.layer({ url: connection.url, ...credentials })
    case "sentinel":
      if (connection.client === "ioredis") {
        return IoredisBackend.layer({
          sentinels: connection.sentinels.map(({ host, port }) => ({ host, port })),
          name: connection.masterName,
          ...credentials
        })
      }
      return NodeRedisBackend.layerSentinel({
        name: connection.masterName,
        sentinels: connection.sentinels,
        nodeClientOptions: credentials
      })
    case "cluster": {
      const map = connection.addressMap
      if (connection.client === "ioredis") {
        const nodes = connection.rootUrls.map((url) => {
          const { hostname, port } = new URL(url)
          return { host: hostname, port: Number(port) }
        })
        return IoredisBackend.layerCluster(nodes, {
          redisOptions: credentials,
          ...(map === undefined ? {} : { natMap: (address: string) => map[address] ?? null })
        })
      }
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

/** How a call ended, as its X line says: the outcome and its detail. */
type Ending = readonly [Outcome, string]

const endingOf = (exit: Exit.Exit<unknown, unknown>): Ending => {
  if (Exit.isSuccess(exit)) return ["ok", ""]
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "Some") {
    const value = error.value as { readonly _tag: string } & Record<string, unknown>
    return [value._tag as Outcome, detailOf(value)]
  }
  return ["defect", Cause.pretty(exit.cause).split("\n")[0] ?? ""]
}

/** The body of every call: records its entry (with the token `token` reads) and its exit, and sleeps between. */
type Body = <R>(token: Effect.Effect<number, never, R>) => Effect.Effect<void, never, R>

/** One call of fiber `fiber` on `key`: takes the key as the cell says, runs `body` while it holds it, says how it ended. */
type Attempt = (call: string, key: string, permits: number, fiber: number, body: Body) => Effect.Effect<Ending>

/** A lock or semaphore call: `guard` runs the body under the key's lock, or under `permits` of its semaphore. */
const guarded =
  (
    guard: (
      key: string,
      permits: number
    ) => <A, E>(body: Effect.Effect<A, E, Lease.Lease>) => Effect.Effect<A, E | LockError.LockError>
  ): Attempt =>
  (_call, key, permits, _fiber, body) =>
    Effect.map(Effect.exit(guard(key, permits)(body(Lease.fencingToken))), endingOf)

/**
 * An election call: campaign for `key` (the fiber's own candidate id), write the term, lead with the
 * body, resign. It runs in a fiber of its own: a lead lost while nothing watches it (between the
 * campaign and `lead`, or between `lead` and `resign`) interrupts the fiber that campaigned
 * (`interruptOnLoss`, on by default), and the loop must go on; such an interruption is the loss
 * `leadership.ended` reports.
 */
const campaigning =
  (elections: Election.ElectionClient, worker: number, waitTimeout: number): Attempt =>
  (call, key, _permits, fiber, body) =>
    Effect.gen(function* () {
      let leadership: Leadership.Leadership | undefined
      const term = Effect.scoped(
        Effect.gen(function* () {
          const lead = yield* elections.campaign(key, { waitTimeout, candidate: `w${worker}-f${fiber}` })
          leadership = lead
          emit(["G", call, monotonicMicros(), lead.term])
          const led = yield* lead.lead(body(Effect.succeed(lead.term)))
          yield* lead.resign
          return led
        })
      )
      const exit = yield* Fiber.await(yield* Effect.forkChild(term, { startImmediately: true }))
      if (Exit.isSuccess(exit)) {
        return Option.isSome(exit.value)
          ? (["ok", ""] as const)
          : (["defect", "lead returned None (resigned first) though nothing resigned"] as const)
      }
      const held = leadership
      if (held !== undefined && Cause.hasInterruptsOnly(exit.cause)) {
        // Interrupted by a loss nothing watched: `ended` says which.
        const ended = yield* Effect.exit(held.ended)
        return Exit.isFailure(ended)
          ? endingOf(ended)
          : (["defect", "interrupted while leading, and the lead ended without a loss"] as const)
      }
      return endingOf(exit)
    })

/** Writes every state the observer of election `key` shows, until interrupted; a failure ends it with an OX line. */
const observing = (elections: Election.ElectionClient, key: string): Effect.Effect<void> =>
  Stream.runForEach(elections.observe(key), (state) =>
    Effect.sync(() =>
      emit(
        Option.isSome(state)
          ? ["O", key, monotonicMicros(), state.value.term, state.value.revision, state.value.candidate]
          : ["O", key, monotonicMicros(), null, null, null]
      )
    )
  ).pipe(
    Effect.exit,
    Effect.flatMap((exit) =>
      Effect.sync(() => {
        if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return
        const [outcome, detail] = endingOf(exit)
        emit(["OX", key, monotonicMicros(), `${outcome} ${detail}`])
      })
    )
  )

const program = Effect.gen(function* () {
  listenToParent()
  const params = yield* Schema.decodeUnknownEffect(WorkerParamsJson)(process.argv[2])
  const semaphore = params.semaphore
  const run = (attempt: Attempt, observe?: (key: string) => Effect.Effect<void>) =>
    Effect.gen(function* () {
      emit(["ready", process.pid])
      yield* Effect.promise(() => started)
      const observers =
        observe === undefined
          ? []
          : yield* Effect.forEach(params.keys, (key) => Effect.forkChild(observe(key), { startImmediately: true }))

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
            const body: Body = (token) =>
              Effect.sync(monotonicMicros).pipe(
                Effect.flatMap((t) => Effect.map(token, (value) => emit(["E", call, t, bodyMillis, value]))),
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
            const [outcome, detail] = yield* attempt(call, key, permits, f, body)
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
      yield* Effect.forEach(observers, Fiber.interrupt, { discard: true })
      emit(["done"])
    })
  const clientOptions = {
    leaseDuration: params.leaseMillis,
    namespace: params.namespace,
    replicaAcknowledgement: params.replicaAcknowledgement
  }
  const backend = backendLayer(params.connection, params.auth)
  const waitTimeout = params.waitTimeoutMillis
  const cell =
    params.election === true
      ? Effect.gen(function* () {
          const elections = yield* Election.Election
          yield* run(campaigning(elections, params.worker, waitTimeout), (key) => observing(elections, key))
        }).pipe(Effect.provide(Election.layer(clientOptions).pipe(Layer.provide(backend))))
      : semaphore === undefined
        ? Effect.gen(function* () {
            const lock = yield* Lock.Lock
            yield* run(guarded((key) => lock.withLock(key, { waitTimeout })))
          }).pipe(Effect.provide(Lock.layer(clientOptions).pipe(Layer.provide(backend))))
        : Effect.gen(function* () {
            const semaphores = yield* Semaphore.Semaphore
            const limit = semaphore.limit
            yield* run(guarded((key, permits) => semaphores.withPermits(key, { limit, permits, waitTimeout })))
          }).pipe(Effect.provide(Semaphore.layer(clientOptions).pipe(Layer.provide(backend))))
  yield* cell.pipe(
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
