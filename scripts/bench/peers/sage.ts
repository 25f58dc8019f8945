// @sage/lock in the peers bench, through its public API only: `Lock.layer` over
// `NodeRedisBackend.layer` (or `IoredisBackend.layer`), run by a `ManagedRuntime`, and `withLock(key, { waitTimeout })(body)`. The
// workloads are the ones in drivers.ts written in Effect, as an Effect user would write them (fibers,
// `Effect.sleep`, a `Deferred` as the held bodies' gate), so that one `runPromise` covers a whole
// measurement and no per-call bridge to Promises is charged to the lock. A loss is a `LockLost` failure.
// `makeWith` runs the same workloads on anything with a lock's `withLock` (the semaphores bench's
// `Semaphore` client, bound to a limit).
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { Lock, type LockError } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import { IoredisBackend } from "@sage/lock-ioredis"
import {
  collectGarbage,
  settleMillis,
  cpuMicros,
  heldKey,
  heldWarmupConcurrency,
  heldWarmupMillis,
  type Outcome,
  range,
  type Runner
} from "./drivers.ts"
import { clockMillis } from "./clock.ts"
import { watchGc } from "./gc.ts"
import type { AcquisitionRecord, Result, Workload } from "./protocol.ts"
import * as Requests from "./requests.ts"

/** What ends a run: a failure that waiting again cannot fix. */
type LockFailure = LockError.LockRedisError | LockError.InvalidArgument

/** What the workloads call: a `Lock` client's `withLock`, or the same shape over another client. */
export type Client = Pick<Lock.LockClient<string>, "withLock">

const uncontendedWait = "20 seconds"

/** A locked call's outcome; other failures (LockRedisError, InvalidArgument) fail the run. */
const settle = <R>(call: Effect.Effect<void, LockError.LockError, R>): Effect.Effect<Outcome, LockFailure, R> =>
  call.pipe(
    Effect.as<Outcome>("ok"),
    Effect.catchTags({
      TimedOut: () => Effect.succeed<Outcome>("timeout"),
      LockLost: () => Effect.succeed<Outcome>("lost")
    })
  )

const uncontended = (lock: Client, options: { readonly prefix: string; readonly concurrency: number }, until: number) =>
  Effect.gen(function* () {
    let cycles = 0
    let failures = 0
    const gc = watchGc()
    const cpu = process.cpuUsage()
    const start = clockMillis()
    yield* Effect.forEach(
      range(options.concurrency),
      (i) =>
        Effect.gen(function* () {
          const call = settle(lock.withLock(`${options.prefix}:${i}`, { waitTimeout: uncontendedWait })(Effect.void))
          while (clockMillis() < until) {
            if ((yield* call) === "ok") cycles++
            else failures++
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
    return {
      _tag: "uncontended",
      cycles,
      elapsedMillis: clockMillis() - start,
      cpuMicros: cpuMicros(cpu),
      ...gc(),
      failures
    } satisfies Result
  })

const contended = (
  lock: Client,
  options: {
    readonly key: string
    readonly workers: ReadonlyArray<number>
    readonly holdMillis: number
    readonly thinkMillis: number
  },
  until: number
) =>
  Effect.gen(function* () {
    const records: Array<AcquisitionRecord> = []
    let lost = 0
    const cpu = process.cpuUsage()
    const requests = Requests.sent()
    const contender = (worker: number) =>
      Effect.gen(function* () {
        for (;;) {
          const requested = clockMillis()
          if (requested >= until) return
          let acquired = 0
          let released = 0
          const body = Effect.suspend(() => {
            acquired = clockMillis()
            return Effect.sleep(options.holdMillis)
          }).pipe(
            Effect.andThen(
              Effect.sync(() => {
                released = clockMillis()
              })
            )
          )
          const result = yield* settle(lock.withLock(options.key, { waitTimeout: until - requested })(body))
          if (acquired > 0) records.push([worker, requested, acquired, released])
          if (result === "lost") lost++
          if (result === "timeout") return
          if (options.thinkMillis > 0) yield* Effect.sleep(options.thinkMillis)
        }
      })
    yield* Effect.forEach(options.workers, contender, { concurrency: "unbounded", discard: true })
    return {
      _tag: "contended",
      records,
      requests: Requests.sent() - requests,
      cpuMicros: cpuMicros(cpu),
      lost
    } satisfies Result
  })

const held = (
  lock: Client,
  options: {
    readonly prefix: string
    readonly count: number
    readonly holdMillis: number
    readonly acquireBudgetMillis: number
    readonly limit?: number | undefined
  }
) =>
  Effect.gen(function* () {
    const heapBefore = collectGarbage().heapUsed
    const start = clockMillis()
    const release = yield* Deferred.make<void>()
    const allHeld = yield* Deferred.make<void>()
    let acquired = 0
    let lost = 0
    const body = Effect.suspend(() => {
      if (++acquired === options.count) Deferred.doneUnsafe(allHeld, Effect.void)
      return Deferred.await(release)
    })
    const calls = yield* Effect.forEach(
      range(options.count),
      (i) =>
        settle(
          lock.withLock(heldKey(options.prefix, i, options.limit), { waitTimeout: options.acquireBudgetMillis })(body)
        ).pipe(
          Effect.map((result) => {
            if (result === "lost") lost++
          })
        ),
      { concurrency: "unbounded", discard: true }
    ).pipe(Effect.forkChild)
    yield* Effect.timeoutOption(Deferred.await(allHeld), options.acquireBudgetMillis)
    const acquireMillis = clockMillis() - start
    const collected = collectGarbage()
    yield* Effect.sleep(settleMillis)
    const gc = watchGc()
    const cpu = process.cpuUsage()
    const windowStart = clockMillis()
    yield* Effect.sleep(options.holdMillis)
    const cpuUsed = cpuMicros(cpu)
    const holdMillis = clockMillis() - windowStart
    const collections = gc()
    yield* Deferred.succeed(release, undefined)
    yield* Fiber.join(calls)
    return {
      _tag: "held",
      requested: options.count,
      acquired,
      acquireMillis,
      holdMillis,
      cpuMicros: cpuUsed,
      ...collections,
      heapBytes: collected.heapUsed - heapBefore,
      collectMicros: collected.cpuMicros,
      lost
    } satisfies Result
  })

/** Untimed: the same calls on private keys, so the window starts with warm code (see drivers.ts `warm`). */
const warm = (lock: Client, workload: Workload, prefix: string): Effect.Effect<void, LockFailure> => {
  switch (workload._tag) {
    case "uncontended":
      return uncontended(lock, { prefix, concurrency: workload.concurrency }, clockMillis() + workload.warmupMillis)
    case "contended":
      return Effect.forEach(
        range(workload.workers.length),
        (i) =>
          Effect.gen(function* () {
            const call = settle(lock.withLock(`${prefix}:${i}`, { waitTimeout: uncontendedWait })(Effect.void))
            for (let n = 0; n < workload.warmupCycles; n++) yield* call
          }),
        { concurrency: "unbounded", discard: true }
      )
    case "held":
      return uncontended(lock, { prefix, concurrency: heldWarmupConcurrency }, clockMillis() + heldWarmupMillis)
  }
}

/**
 * The workloads over the client that `client` takes from `layer`'s services for each workload, on one
 * `ManagedRuntime`; the layer (connections included) is built before this answers.
 */
export const makeWith = async <S, E>(
  layer: Layer.Layer<S, E>,
  client: (workload: Workload) => Effect.Effect<Client, never, S>
): Promise<Runner> => {
  const runtime = ManagedRuntime.make(layer)
  const run = (workload: Workload, prefix: string, until: number): Promise<Result> =>
    runtime.runPromise(
      Effect.flatMap(client(workload), (lock): Effect.Effect<Result, LockFailure> => {
        switch (workload._tag) {
          case "uncontended":
            return uncontended(lock, { prefix, concurrency: workload.concurrency }, until)
          case "contended":
            return contended(lock, workload, until)
          case "held":
            return held(lock, { prefix, ...workload })
        }
      })
    )
  await runtime.runPromise(Effect.void)
  return {
    run,
    warm: (workload, prefix) =>
      runtime.runPromise(Effect.flatMap(client(workload), (lock) => warm(lock, workload, prefix))),
    close: () => runtime.dispose()
  }
}

/** The standalone backend; PEERS_SAGE_CONNECTIONS=n sets its `connections` (default 2), for A/B runs. */
export const backend = (url: string) => {
  const connections = process.env["PEERS_SAGE_CONNECTIONS"]
  return NodeRedisBackend.layer({ url, ...(connections === undefined ? {} : { connections: Number(connections) }) })
}

/**
 * One namespace for every client in every process: the keys carry each run's prefix, and processes
 * that share a key must share the namespace too, or they would not contend at all.
 */
const namespace = "peers"

/** The workloads on one `Lock` client, built when the runner is made (the connection included). */
export const make = (url: string, leaseMillis: number): Promise<Runner> =>
  makeWith(Lock.layer({ namespace, leaseDuration: leaseMillis }).pipe(Layer.provide(backend(url))), () => Lock.Lock)

/** The same over the ioredis backend (its own connections, with the same count as `backend`). */
export const makeOverIoredis = (url: string, leaseMillis: number): Promise<Runner> => {
  const connections = process.env["PEERS_SAGE_CONNECTIONS"]
  const { hostname, port } = new URL(url)
  const layer = IoredisBackend.layer({
    host: hostname,
    port: Number(port),
    ...(connections === undefined ? {} : { connections: Number(connections) })
  })
  return makeWith(Lock.layer({ namespace, leaseDuration: leaseMillis }).pipe(Layer.provide(layer)), () => Lock.Lock)
}
