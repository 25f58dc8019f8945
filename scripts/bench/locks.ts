// The sections that go through the `Lock` service: uncontended latency, throughput over distinct
// keys, one contended key, and renewal of a short lease. Every loop has a fixed iteration count or a
// fixed duration, and every wait a timeout, so a sick server ends the run with an error, not a hang.
import * as Effect from "effect/Effect"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import type { InvalidArgument, LockError, LockRedisError } from "@sage/lock/LockError"
import type * as Scope from "effect/Scope"
import { now, rate, type Summary, summarize } from "./stats.ts"
import type { Deployment, Recorder } from "./targets.ts"

export type LockClient = Lock.LockClient<string>

/** Generous: no section should ever wait this long, so a TimedOut is a finding worth an error. */
const waitTimeout = "20 seconds"

/** A lock client over the deployment's (instrumented) backend. */
export const client = (
  deployment: Deployment,
  options: { readonly namespace: string; readonly leaseMillis: number; readonly acknowledge: boolean }
): Effect.Effect<LockClient, InvalidArgument | LockRedisError, Scope.Scope> =>
  Lock.make<string>({
    namespace: options.namespace,
    leaseDuration: options.leaseMillis,
    replicaAcknowledgement: options.acknowledge
  }).pipe(Effect.provideService(LockBackend, deployment.backend))

/** Takes what the recorder collected and empties it. */
const drain = (recorder: Recorder) => {
  const failures = recorder.failures
  recorder.failures = 0
  return {
    acquire: recorder.acquire.splice(0),
    renew: recorder.renew.splice(0),
    release: recorder.release.splice(0),
    failures
  }
}

/** Runs `effect` with the backend's calls recorded, returning its result and the backend timings. */
const recorded = <A, E>(deployment: Deployment, effect: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    drain(deployment.recorder)
    deployment.recorder.recording = true
    const result = yield* Effect.ensuring(
      effect,
      Effect.sync(() => {
        deployment.recorder.recording = false
      })
    )
    return { result, backend: drain(deployment.recorder) }
  })

const range = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

export interface LatencyResult {
  readonly total: Summary
  /** Sequential, so this is 1000 / mean latency. */
  readonly opsPerSecond: number
  readonly acquire: Summary
  readonly release: Summary
  /** Backend calls that failed (each one retried by the lock). */
  readonly failures: number
}

/** Sequential `withLock(key)(Effect.void)` on a fresh key each time, after an untimed warm-up. */
export const latency = Effect.fnUntraced(function* (
  deployment: Deployment,
  lock: LockClient,
  options: { readonly warmup: number; readonly iterations: number; readonly prefix: string }
): Effect.fn.Return<LatencyResult, LockError> {
  for (let i = 0; i < options.warmup; i++) {
    yield* lock.withLock(`${options.prefix}:warm:${i}`, { waitTimeout })(Effect.void)
  }
  const samples: Array<number> = []
  const { result: elapsed, backend } = yield* recorded(
    deployment,
    Effect.gen(function* () {
      const start = now()
      for (let i = 0; i < options.iterations; i++) {
        const before = now()
        yield* lock.withLock(`${options.prefix}:${i}`, { waitTimeout })(Effect.void)
        samples.push(now() - before)
      }
      return now() - start
    })
  )
  return {
    total: summarize(samples),
    opsPerSecond: rate(samples.length, elapsed),
    acquire: summarize(backend.acquire),
    release: summarize(backend.release),
    failures: backend.failures
  }
})

export interface ThroughputResult {
  readonly total: Summary
  readonly opsPerSecond: number
  /** Backend calls that failed (each one retried by the lock). */
  readonly failures: number
}

/**
 * `concurrency` fibers, each on its own key, doing `withLock(key)(Effect.void)` back to back until
 * the time is up (an operation in flight at the deadline is finished and counted).
 */
export const throughput = Effect.fnUntraced(function* (
  deployment: Deployment,
  lock: LockClient,
  options: {
    readonly concurrency: number
    readonly warmupMillis: number
    readonly durationMillis: number
    readonly prefix: string
  }
): Effect.fn.Return<ThroughputResult, LockError> {
  const run = (millis: number, samples: Array<number>) =>
    Effect.gen(function* () {
      const start = now()
      const deadline = start + millis
      yield* Effect.forEach(
        range(options.concurrency),
        (i) =>
          Effect.gen(function* () {
            const key = `${options.prefix}:${i}`
            while (now() < deadline) {
              const before = now()
              yield* lock.withLock(key, { waitTimeout })(Effect.void)
              samples.push(now() - before)
            }
          }),
        { concurrency: "unbounded", discard: true }
      )
      return now() - start
    })
  // The warm-up also fills the dedicated pools of replicated backends, so no connect is measured.
  yield* run(options.warmupMillis, [])
  const samples: Array<number> = []
  const { result: elapsed, backend } = yield* recorded(deployment, run(options.durationMillis, samples))
  return { total: summarize(samples), opsPerSecond: rate(samples.length, elapsed), failures: backend.failures }
})

export interface ContendedResult {
  readonly acquisitions: number
  readonly elapsedMillis: number
  readonly perSecond: number
  /** From the `withLock` call to the start of its body. */
  readonly wait: Summary
  /** Acquisitions by a different fiber than the previous holder. */
  readonly handoffs: number
  /** Bodies that started while another was running (a sanity check of the measurement). */
  readonly overlaps: number
}

/**
 * `fibers` fibers on one key, each doing `perFiber` `withLock` calls with a `bodyMillis` body. Fiber
 * `i` uses `locks[i % locks.length]`: one client measures in-process turns, one client per fiber
 * measures contention at the server (as separate processes would have).
 */
export const contended = Effect.fnUntraced(function* (
  locks: ReadonlyArray<LockClient>,
  options: { readonly fibers: number; readonly perFiber: number; readonly bodyMillis: number; readonly key: string }
): Effect.fn.Return<ContendedResult, LockError> {
  const waits: Array<number> = []
  let holder: number | undefined
  let previous: number | undefined
  let handoffs = 0
  let overlaps = 0
  const start = now()
  yield* Effect.forEach(
    range(options.fibers),
    (fiber) =>
      Effect.gen(function* () {
        for (let n = 0; n < options.perFiber; n++) {
          const called = now()
          yield* locks[fiber % locks.length]!.withLock(options.key, { waitTimeout })(
            Effect.suspend(() => {
              waits.push(now() - called)
              if (holder !== undefined) overlaps++
              if (previous !== undefined && previous !== fiber) handoffs++
              holder = fiber
              previous = fiber
              return Effect.ensuring(
                Effect.sleep(options.bodyMillis),
                Effect.sync(() => {
                  holder = undefined
                })
              )
            })
          )
        }
      }),
    { concurrency: "unbounded", discard: true }
  )
  const elapsedMillis = now() - start
  return {
    acquisitions: waits.length,
    elapsedMillis,
    perSecond: rate(waits.length, elapsedMillis),
    wait: summarize(waits),
    handoffs,
    overlaps
  }
})

export interface RenewalResult {
  readonly renewals: number
  /** Backend calls that failed (each one retried by the lock). */
  readonly failures: number
  readonly renew: Summary
  /** The whole `withLock` call minus the body's nominal length: acquire, release and scheduling. */
  readonly overrunMillis: number
  /** The body as measured inside minus its nominal length: what renewal took from the body. */
  readonly bodyOverrunMillis: number
}

/** One `withLock` whose body sleeps `bodyMillis`, on a client with a short lease. */
export const renewal = Effect.fnUntraced(function* (
  deployment: Deployment,
  lock: LockClient,
  options: { readonly bodyMillis: number; readonly key: string }
): Effect.fn.Return<RenewalResult, LockError> {
  let body = Number.NaN
  const { result: total, backend } = yield* recorded(
    deployment,
    Effect.gen(function* () {
      const start = now()
      yield* lock.withLock(options.key, { waitTimeout })(
        Effect.suspend(() => {
          const entered = now()
          return Effect.map(Effect.sleep(options.bodyMillis), () => {
            body = now() - entered
          })
        })
      )
      return now() - start
    })
  )
  return {
    renewals: backend.renew.length,
    failures: backend.failures,
    renew: summarize(backend.renew),
    overrunMillis: total - options.bodyMillis,
    bodyOverrunMillis: body - options.bodyMillis
  }
})
