/**
 * Locks, semaphores and elections for code that is not written in Effect: every call returns a
 * Promise, work runs as an `async (signal, lease) => ...` function whose `signal` aborts when the
 * lock is lost, and held locks are handles usable with `await using`.
 *
 * Build one client per backend with `PromiseClient.make(backendLayer, options)`, use it from
 * anywhere, and `close()` it when the program is done: that closes its connections and stops its
 * timers, so the process can exit. Underneath, each call runs the same Effect code as `Lock`,
 * `Semaphore` and `Election`, on one runtime per client.
 *
 * Failures reject with the library's own errors (`TimedOut`, `LockLost`, `InvalidArgument`,
 * `LockRedisError`: classes with a `_tag`, usable with `instanceof`), and a function's own
 * rejection passes through unchanged.
 *
 * @since 0.2.1
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Election from "./Election.ts"
import { type Handle, Lease } from "./Lease.ts"
import * as Lock from "./Lock.ts"
import type { LockBackend } from "./LockBackend.ts"
import type { LockRedisError, InvalidArgument } from "./LockError.ts"
import * as Semaphore from "./Semaphore.ts"

/**
 * Options of a Promise client: those of the lock, semaphore and election clients it makes (each
 * made the first time it is used).
 *
 * @category options
 * @since 0.2.1
 */
export interface PromiseClientOptions {
  readonly lock?: Lock.LockOptions<string> | undefined
  readonly semaphore?: Semaphore.SemaphoreOptions<string> | undefined
  readonly election?: Election.ElectionOptions | undefined
}

/**
 * Per-call options every waiting call takes: how long to wait (milliseconds or a duration such as
 * `"5 seconds"`), and a signal that abandons the wait (the call then rejects).
 *
 * @category options
 * @since 0.2.1
 */
export interface WaitOptions {
  readonly waitTimeout: Duration.Input
  readonly signal?: AbortSignal | undefined
}

/**
 * A lock or permits held until released: `await using held = await client.acquire(...)` releases
 * them when the block ends.
 *
 * @category models
 * @since 0.2.1
 */
export interface Held extends AsyncDisposable {
  /** The grant's fencing token. */
  readonly fencingToken: number
  /** Aborts when the lease is lost (its reason is the `LockLost`); never aborts after `release`. */
  readonly signal: AbortSignal
  /** The lease left, in milliseconds, as the client counts it (0 once lost or released). */
  readonly remainingMillis: () => number
  /** Releases; resolves once the server has answered (or a second has passed). Idempotent. */
  readonly release: () => Promise<void>
}

/**
 * A lead held until resigned (see `Election.campaign`): `await using` resigns when the block ends.
 *
 * @category models
 * @since 0.2.1
 */
export interface Lead extends Held {
  /** The term: the grant's fencing token. */
  readonly term: number
  readonly candidate: string
  /** Updates what observers see, in the same term; rejects with `LockLost` once the lead is gone. */
  readonly proclaim: (value: string) => Promise<void>
  /** Steps down now (the same as `release`). */
  readonly resign: () => Promise<void>
}

/**
 * The result of a `try...` call: whether it got the lock, and the function's value if it did.
 *
 * @category models
 * @since 0.2.1
 */
export type Attempt<A> = { readonly acquired: true; readonly value: A } | { readonly acquired: false }

/**
 * What `using`-style calls run: gets a signal that aborts when the lock is lost (the call then
 * rejects with `LockLost`) and the lease.
 *
 * @category models
 * @since 0.2.1
 */
export type Work<A> = (signal: AbortSignal, lease: Handle) => Promise<A>

/**
 * A Promise client (see the module's description).
 *
 * @category models
 * @since 0.2.1
 */
export interface PromiseClient extends AsyncDisposable {
  /** Waits for the lock, runs `work`, releases, and resolves with `work`'s value. */
  readonly using: <A>(key: string, options: WaitOptions, work: Work<A>) => Promise<A>
  /** Runs `work` only if the lock is free now. */
  readonly tryUsing: <A>(key: string, work: Work<A>) => Promise<Attempt<A>>
  /** Waits for the lock and holds it, renewed, until `release` (or the end of an `await using` block). */
  readonly acquire: (key: string, options: WaitOptions) => Promise<Held>
  /** `Semaphore.withPermits` with a function. */
  readonly withPermits: <A>(key: string, options: WaitOptions & Semaphore.PermitsOptions, work: Work<A>) => Promise<A>
  /** `Semaphore.tryWithPermits` with a function. */
  readonly tryWithPermits: <A>(key: string, options: Semaphore.PermitsOptions, work: Work<A>) => Promise<Attempt<A>>
  /** Waits for permits and holds them until `release`. */
  readonly acquirePermits: (key: string, options: WaitOptions & Semaphore.PermitsOptions) => Promise<Held>
  /** Campaigns for the lead of `name` and holds it until `resign`. */
  readonly campaign: (
    name: string,
    options?: Omit<Election.CampaignOptions, "interruptOnLoss"> & { readonly signal?: AbortSignal | undefined }
  ) => Promise<Lead>
  /** Who leads `name` now, or `undefined`. */
  readonly leader: (name: string) => Promise<Election.Leader | undefined>
  /** Who leads `name`, now and at every change (`undefined`: nobody), until the loop breaks. */
  readonly observe: (name: string) => AsyncIterable<Election.Leader | undefined>
  /** Releases everything still held, closes the connections and stops the timers. Idempotent. */
  readonly close: () => Promise<void>
}

/** A function's own rejection, carried through the Effect call unchanged. */
class WorkFailed {
  readonly error: unknown
  constructor(error: unknown) {
    this.error = error
  }
}

/** The rejection for a failed call: the library's error, the function's own, or the defect. */
const rejectionOf = (cause: Cause.Cause<unknown>): unknown => {
  const failure = cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) return failure.error instanceof WorkFailed ? failure.error.error : failure.error
  const defect = cause.reasons.find(Cause.isDieReason)
  if (defect !== undefined) return defect.defect
  return new Error("the call was interrupted (its signal aborted, or the client closed)")
}

const settle = <A>(exit: Exit.Exit<A, unknown>): A => {
  if (Exit.isSuccess(exit)) return exit.value
  throw rejectionOf(exit.cause)
}

/**
 * `work` as the body of a lock call: the body's interruption (a loss, the caller's signal, the
 * client's close) aborts its signal. One callback, not `Effect.tryPromise`, which costs a few more
 * microseconds a call than the rest of the Promise layer.
 */
const bodyOf = <A>(work: Work<A>): Effect.Effect<A, WorkFailed, Lease> =>
  Lease.use((lease) =>
    Effect.callback<A, WorkFailed>((resume) => {
      const controller = new AbortController()
      let promise: Promise<A>
      try {
        // A plain function that returns a value rather than a Promise is taken as it is.
        promise = Promise.resolve(work(controller.signal, lease))
      } catch (error) {
        resume(Effect.fail(new WorkFailed(error)))
        return
      }
      promise.then(
        (value) => resume(Effect.succeed(value)),
        (error: unknown) => resume(Effect.fail(new WorkFailed(error)))
      )
      return Effect.sync(() => controller.abort())
    })
  )

const attemptOf = <A>(option: Option.Option<A>): Attempt<A> =>
  Option.isSome(option) ? { acquired: true, value: option.value } : { acquired: false }

/**
 * Builds a Promise client over a backend layer. Nothing connects until the first call.
 *
 * @example
 * ```ts
 * import { PromiseClient } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const locks = PromiseClient.make(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379" }), {
 *   lock: { namespace: "billing" }
 * })
 *
 * export const chargeOnce = (invoice: string) =>
 *   locks.using(`invoice:${invoice}`, { waitTimeout: 5_000 }, async (signal, lease) => {
 *     // pass `signal` to fetch or the database driver: it aborts if the lock is lost
 *     return `charged in lease ${lease.fencingToken}`
 *   })
 *
 * export const shutdown = () => locks.close()
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const make = (
  backend: Layer.Layer<LockBackend, InvalidArgument | LockRedisError>,
  options: PromiseClientOptions = {}
): PromiseClient => {
  const runtime = ManagedRuntime.make(backend)
  // The clients' renewal schedulers and held locks live in this scope, closed before the runtime.
  const scope = Scope.makeUnsafe()
  /**
   * Runs `effect` to a Promise: one fiber, observed directly (no Promise of an `Exit` in between),
   * once the runtime is built.
   */
  const run = <A, E>(effect: Effect.Effect<A, E, LockBackend>, signal?: AbortSignal): Promise<A> => {
    const context = runtime.cachedContext
    if (context === undefined)
      return runtime.runPromiseExit(effect, signal === undefined ? undefined : { signal }).then(settle)
    return new Promise<A>((resolve, reject) => {
      const fiber = Effect.runForkWith(context)(effect, signal === undefined ? undefined : { signal })
      fiber.addObserver((exit) => {
        if (Exit.isSuccess(exit)) resolve(exit.value)
        else reject(rejectionOf(exit.cause))
      })
    })
  }
  /** A client made on first use; then handed out without waiting on a Promise. */
  const once = <A>(make: Effect.Effect<A, InvalidArgument | LockRedisError, LockBackend | Scope.Scope>) => {
    let made: Promise<A> | undefined
    let value: A | undefined
    return <B>(use: (client: A) => Promise<B>): Promise<B> => {
      if (value !== undefined) return use(value)
      made ??= run(Scope.provide(make, scope)).then((client) => (value = client))
      return made.then(use)
    }
  }
  const locks = once(Lock.make(options.lock))
  const semaphores = once(Semaphore.make(options.semaphore))
  const elections = once(Election.make(options.election))

  /** Holds what `acquire` gives in a scope of its own, and watches the lease for loss. */
  const hold = <A extends Handle>(
    acquire: Effect.Effect<A, unknown, Scope.Scope>,
    signal: AbortSignal | undefined
  ): Promise<{ readonly handle: A; readonly held: Held }> =>
    run(
      Effect.gen(function* () {
        const own = yield* Scope.fork(scope, "sequential")
        const handle = yield* Effect.onError(Scope.provide(acquire, own), () => Scope.close(own, Exit.void))
        const lost = new AbortController()
        yield* Effect.forkIn(
          Effect.catch(handle.lost, (error) =>
            Effect.sync(() => {
              if (error.reason !== "released") lost.abort(error)
            })
          ),
          own
        )
        let released: Promise<void> | undefined
        const release = (): Promise<void> => (released ??= run(Scope.close(own, Exit.void)))
        const held: Held = {
          fencingToken: handle.fencingToken,
          signal: lost.signal,
          remainingMillis: () => Duration.toMillis(handle.remaining),
          release,
          [Symbol.asyncDispose]: release
        }
        return { handle, held }
      }),
      signal
    )

  let closed: Promise<void> | undefined
  const close = (): Promise<void> => (closed ??= run(Scope.close(scope, Exit.void)).then(() => runtime.dispose()))

  return {
    using: (key, callOptions, work) =>
      locks((lock) => run(lock.withLock(key, callOptions)(bodyOf(work)), callOptions.signal)),
    tryUsing: (key, work) => locks((lock) => run(Effect.map(lock.tryWithLock(key)(bodyOf(work)), attemptOf))),
    acquire: (key, callOptions) =>
      locks((lock) =>
        hold(lock.acquire(key, { ...callOptions, interruptOnLoss: false }), callOptions.signal).then(({ held }) => held)
      ),
    withPermits: (key, callOptions, work) =>
      semaphores((semaphore) => run(semaphore.withPermits(key, callOptions)(bodyOf(work)), callOptions.signal)),
    tryWithPermits: (key, callOptions, work) =>
      semaphores((semaphore) => run(Effect.map(semaphore.tryWithPermits(key, callOptions)(bodyOf(work)), attemptOf))),
    acquirePermits: (key, callOptions) =>
      semaphores((semaphore) =>
        hold(semaphore.acquire(key, { ...callOptions, interruptOnLoss: false }), callOptions.signal).then(
          ({ held }) => held
        )
      ),
    campaign: (name, callOptions = {}) =>
      elections((election) => {
        const { signal, ...campaignOptions } = callOptions
        return hold(
          Effect.map(election.campaign(name, { ...campaignOptions, interruptOnLoss: false }), (leadership) =>
            Object.assign(leadership.lease, { leadership })
          ),
          signal
        ).then(({ handle, held }): Lead => {
          const { leadership } = handle
          return {
            ...held,
            term: leadership.term,
            candidate: leadership.candidate,
            proclaim: (value) => run(leadership.proclaim(value)),
            resign: held.release
          }
        })
      }),
    leader: (name) => elections((election) => run(Effect.map(election.leader(name), Option.getOrUndefined))),
    observe: (name) => ({
      [Symbol.asyncIterator]: () => {
        let iterator: AsyncIterator<Election.Leader | undefined> | undefined
        const started = (): Promise<AsyncIterator<Election.Leader | undefined>> =>
          iterator !== undefined
            ? Promise.resolve(iterator)
            : elections((election) => {
                iterator ??= Stream.toAsyncIterable(Stream.map(election.observe(name), Option.getOrUndefined))[
                  Symbol.asyncIterator
                ]()
                return Promise.resolve(iterator)
              })
        return {
          next: () => started().then((it) => it.next()),
          return: (value?: unknown) =>
            iterator?.return === undefined
              ? Promise.resolve({ done: true as const, value: undefined })
              : iterator.return(value)
        }
      }
    }),
    close,
    [Symbol.asyncDispose]: close
  }
}
