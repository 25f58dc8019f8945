// The machinery of one locked call: key encoding, the token, acquisition, the body raced against
// loss, and the release. `Lock.ts` is the public face; everything a call does lives here.
//
// Cost matters here: this runs for every `withLock`. The body runs in a fiber of its own (so that
// loss can interrupt it without interrupting the caller); renewal is the client's shared scheduler
// (`renewals.ts`), not a fiber or timer per lock; the backend keeps its own time limits, so no call
// is wrapped in a racing timer; metrics are pre-bound to their attributes; spans capture no stack.
// The call reads its fiber's clock and context once, and every step that needs neither a new fiber
// nor an asynchronous wait is plain code inside the steps that remain: an uncontended call over
// node-redis takes 18 Effect steps (45 before session 13, 22 before session 28), and at tens of
// thousands of calls a second each step shows in the client's CPU (docs/benchmarks-history.md).
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import type * as KeyCodec from "../KeyCodec.ts"
import { Lease } from "../Lease.ts"
import type { Backend, LeaseRequest } from "../LockBackend.ts"
import { type InvalidArgument, type LockError, LockLost } from "../LockError.ts"
import { acquire, type AcquireOutcome, type HeldLease } from "./acquire.ts"
import { lockKey } from "./keys.ts"
import { LeaseHandle } from "./lease.ts"
import type * as LocalQueue from "./localQueue.ts"
import type * as Metrics from "./metrics.ts"
import { releaseBounded, releaseNow, type ReleaseOutcome } from "./release.ts"
import * as Renewals from "./renewals.ts"
import * as Transfer from "./transfer.ts"
import { invalid, render, type Settings } from "./settings.ts"
import { monotonicMillis } from "./time.ts"
import { newToken } from "./token.ts"
import { annotate, type CallTrace, event } from "./tracing.ts"

/** What every call of one lock client shares. */
export interface Client {
  readonly backend: Backend
  readonly settings: Settings
  readonly renewals: Renewals.Renewals
  readonly queue: LocalQueue.LocalQueue<Transfer.Grant>
  readonly metrics: Metrics.ClientMetrics
  /** This client's id in the servers' waiter queues (one contender per client and key). */
  readonly waiterId: string
}

/**
 * The call's exit when the body was interrupted because the lock was lost: `LockLost`, and whatever
 * else went wrong while the body stopped (a finalizer that died, say) beside it, never in its place.
 */
const lostExit = <E>(lost: LockLost, cause: Cause.Cause<E>): Exit.Exit<never, E | LockLost> =>
  Cause.hasInterruptsOnly(cause)
    ? Exit.fail(lost)
    : Exit.failCause(
        Cause.fromReasons<E | LockLost>([
          ...Cause.fail(lost).reasons,
          ...cause.reasons.filter((reason) => !Cause.isInterruptReason(reason))
        ])
      )

const transferredAttempt = { "lock.attempt": 0, "lock.attempt.result": "transferred" }
const acquiredOutcome = { "lock.outcome": "acquired" }

const releaseResults = { Released: "released", NotOwner: "not-owner", Failed: "failed" } as const

/** The Redis key of a lock, or `InvalidArgument` when the codec rejects (or throws on) the key. */
export const encodeKey = <K>(
  codec: KeyCodec.KeyCodec<K>,
  namespace: string,
  key: K
): Result.Result<string, InvalidArgument> => {
  let encoded: Result.Result<string, string>
  try {
    encoded = codec.encode(key)
  } catch (cause) {
    encoded = Result.fail(`the ${codec.name} codec threw: ${render(cause)}`)
  }
  return Result.isSuccess(encoded)
    ? Result.succeed(lockKey(namespace, encoded.success))
    : Result.fail(invalid("key", key, encoded.failure))
}

export interface Call {
  readonly key: string
  /** Monotonic ms when the caller called. */
  readonly startedAt: number
  readonly deadline: number
  readonly mode: "wait" | "try"
  /** The caller waited behind another fiber of this client for the key's turn. */
  readonly waitedBehind: boolean
  /** The call's span, when a tracing backend is installed. */
  readonly trace: CallTrace | undefined
  /** The calling fiber's clock and context, read once when the call starts (metrics, time). */
  readonly clock: Clock.Clock
  readonly context: Context.Context<never>
  /** Hands the key's in-process turn to the next fiber of this client before the call ends. */
  readonly passTurn?: LocalQueue.PassTurn<Transfer.Grant> | undefined
  /** The lock, transferred to this call by the previous fiber of its client that held the key. */
  readonly grant?: Transfer.Grant | undefined
}

/**
 * Acquire (inside the caller's interruptibility), run the body while the lease is renewed, then
 * release uninterruptibly whatever happened. Answers the body's value through `found`, or `busy`
 * when `try` found the lock busy (a waiting call never does). The body is given the call's `Lease`.
 *
 * Called from an uninterruptible region, when the result is to run at once (the key's turn, see
 * `LocalQueue.withTurn`); `restore` is the caller's interruptibility, which the acquisition and the
 * wait for the body get back.
 */
export const runLocked = <A, E, R, B>(
  client: Client,
  call: Call,
  body: Effect.Effect<A, E, R>,
  found: (value: A) => B,
  busy: Effect.Effect<B>,
  restore: LocalQueue.Restore
): Effect.Effect<B, E | LockError, Exclude<R, Lease>> => {
  const { backend, settings, metrics } = client
  const { key, grant } = call
  const token = grant === undefined ? newToken() : grant.token
  // The token the lock is held with: the call's own, or the one a release granted it under.
  let heldToken = token
  // The fencing token the lock is held with, once held: a retried release's evidence (release.ts).
  let heldFence: number | undefined
  // When the lock was acquired (monotonic ms), recorded in the metrics once the body has started.
  let acquiredAt = 0
  // The lease the acquisition got, once it has got one.
  let acquired: HeldLease | undefined
  // Until when (monotonic ms) the lease could be relied on when the body ended.
  let validUntil = Infinity
  if (grant !== undefined) grant.claimed = true
  // Built when it is to run (it starts when built): a grant may make it unnecessary.
  const acquisition = () =>
    acquire({
      backend,
      settings,
      key,
      token,
      startedAt: call.startedAt,
      deadline: call.deadline,
      mode: call.mode,
      waitedBehind: call.waitedBehind,
      // A transfer whose outcome is unknown: the key may hold this token already.
      uncertain: grant !== undefined,
      waiterId: client.waiterId,
      hasSuccessor: () => client.queue.hasWaiters(key),
      unavailable: client.queue.setUnavailable,
      trace: call.trace,
      clock: call.clock,
      settled: (exit, end) => {
        // A lock that was acquired is counted once its body has started (see `hold`).
        if (Exit.isSuccess(exit) && exit.value._tag === "Held") {
          acquiredAt = end
          acquired = exit.value.lease
        } else metrics.acquisition(call.context, exit, call.startedAt, end)
      }
    })
  const request = (timeoutMillis: number): LeaseRequest => ({
    key,
    token: heldToken,
    leaseMillis: settings.leaseMillis,
    timeoutMillis,
    acknowledge: false
  })

  const hold = (held: HeldLease): Effect.Effect<B, E | LockError, Exclude<R, Lease>> => {
    heldToken = held.token
    heldFence = held.fence
    const lease = new LeaseHandle(key, settings.namespace, held.fence, heldToken, backend, client.renewals)
    let fiber: Fiber.Fiber<A, E> | undefined
    const renewal = Renewals.lease(settings, held, call.trace, (error) => {
      lease.lose(error)
      event(call.trace, "lock.lost", { "lock.lost.phase": error.phase, "lock.lost.reason": error.reason })
      fiber?.interruptUnsafe()
    })
    const mustStart = client.renewals.register(renewal)

    const afterBody = (bodyExit: Exit.Exit<A, E>): Effect.Effect<B, E | LockError> => {
      client.renewals.unregister(renewal)
      validUntil = renewal.validUntil
      const lost = lease.release()
      const exit: Exit.Exit<A, E | LockLost> =
        lost !== undefined && Exit.isFailure(bodyExit) && Cause.hasInterrupts(bodyExit.cause)
          ? lostExit(lost, bodyExit.cause)
          : bodyExit
      metrics.run(call.context, exit)
      return finish(exit)
    }

    // The body starts at once, in its own fiber with the caller's context and the lease: a fiber
    // made directly rather than with `Effect.forkChild`, which costs three Effect steps more per
    // call. It is not the caller's child, so the caller waits for it and interrupts it itself,
    // on every path below.
    const run = (): Effect.Effect<B, E | LockError> => {
      lease.renewal = renewal
      const forked = Effect.runForkWith(Context.add(call.context, Lease, lease) as Context.Context<R>)(body)
      fiber = forked
      // Counted here rather than before the fork: metric updates are not free, and the body
      // starting sooner is what a waiter handed the lock is waiting for.
      metrics.acquired(call.context, call.startedAt, acquiredAt)
      if (lease.lostWith !== undefined) forked.interruptUnsafe()
      const done = forked.pollUnsafe()
      if (done !== undefined) return afterBody(done)
      return Effect.flatMap(Effect.exit(restore(Fiber.await(forked))), (awaited) =>
        // Interrupted while the body ran: stop the body and wait for its finalizers. Only then does
        // the call end the lease and start the release (built when it runs: its bound starts then).
        Exit.isSuccess(awaited)
          ? afterBody(awaited.value)
          : Effect.andThen(
              Fiber.interrupt(forked),
              Effect.suspend(() => afterBody(Exit.failCause(awaited.cause)))
            )
      )
    }
    return mustStart ? Effect.andThen(client.renewals.start, Effect.suspend(run)) : run()
  }

  const finish = (exit: Exit.Exit<A, E | LockLost>): Effect.Effect<B, E | LockError> =>
    releaseAndPass((released) => {
      event(call.trace, "lock.release", { "lock.release.result": releaseResults[released._tag] })
      // The body's own failure or interruption (or LockLost from renewal) always wins over release.
      if (Exit.isFailure(exit)) return Effect.failCause(exit.cause)
      // A key found not ours by an attempt sent after the lease could have run out on the server,
      // when the release began before that: the body ended within its lease, and the key may just
      // have expired while the release was retried (a grant's short window, a short lease). That
      // says nothing of the time the body ran, so it is not a loss: the lease freed the key.
      if (released._tag === "NotOwner" && released.startedAt < validUntil && released.sentAt >= validUntil) {
        return Effect.as(
          Effect.logWarning(
            `could not confirm the release of lock ${key}: its lease ran out while the release was retried, after the body completed within it`
          ),
          found(exit.value)
        )
      }
      if (released._tag === "NotOwner") {
        annotate(call.trace, {
          "lock.outcome": "lost",
          "lock.lost.phase": "release",
          "lock.lost.reason": "ownership"
        })
        return Effect.andThen(
          metrics.lost("release"),
          Effect.fail(
            new LockLost({
              key,
              namespace: settings.namespace,
              phase: "release",
              reason: "ownership",
              bodyCompleted: true
            })
          )
        )
      }
      if (released._tag === "Failed") {
        const message = `could not release lock ${key} within one second after the body completed; its lease will free it`
        return Effect.as(
          released.error === undefined ? Effect.logWarning(message) : Effect.logWarning(message, released.error),
          found(exit.value)
        )
      }
      return Effect.succeed(found(exit.value))
    })

  // With a backend that can transfer, a waiting fiber of this client gets the key without it
  // ever being free: one round trip, and no other process can slip in (bounded, see transfer.ts).
  // Otherwise, over an ordered backend, the next fiber of this client may ask for the key at once,
  // right behind the release: its acquisition follows the release on the connection and finds the
  // key free, one round trip after the body instead of two. The turn is handed on in a microtask,
  // which runs once this fiber has sent the release and waits for its reply (a resumed fiber runs
  // at once, inside `resume`: handed on here, the next fiber would send first and find the key busy).
  const releaseAndPass = (
    after: (released: ReleaseOutcome) => Effect.Effect<B, E | LockError>
  ): Effect.Effect<B, E | LockError> => {
    const passTurn = call.passTurn
    if (passTurn === undefined) return releaseNow(backend, request, heldFence, call.clock, after)
    const transfer = backend.transfer
    if (transfer !== undefined && Transfer.mayTransfer(client.queue, key)) {
      return Effect.flatMap(
        Transfer.handOn({
          backend,
          transfer,
          settings,
          queue: client.queue,
          key,
          token: heldToken,
          waiterId: client.waiterId,
          passTurn,
          newToken
        }),
        after
      )
    }
    client.queue.setStreak(key, 0)
    if (backend.ordered === true && client.queue.hasWaiters(key)) queueMicrotask(passTurn)
    return releaseNow(backend, request, heldFence, call.clock, after)
  }

  // A transfer that is known to have happened in time is held at once; otherwise (its outcome
  // unknown, or its reply too late to rely on) this call acquires with the transferred token.
  const transferred = (sentAt: number): Effect.Effect<AcquireOutcome, LockError> => {
    const now = monotonicMillis(call.clock)
    if (now >= sentAt + settings.usableLeaseMillis) return restore(acquisition())
    event(call.trace, "lock.attempt", transferredAttempt)
    annotate(call.trace, acquiredOutcome)
    acquiredAt = now
    return Effect.succeed({ _tag: "Held", lease: { key, token, sentAt, fence: grant!.fence } })
  }
  const start = grant?.sentAt !== undefined ? transferred(grant.sentAt) : restore(acquisition())

  return Effect.matchCauseEffect(start, {
    onSuccess: (outcome: AcquireOutcome) => (outcome._tag === "Busy" ? busy : hold(outcome.lease)),
    // Interrupted as the acquisition succeeded (its success reached the end of the interruptible
    // part together with the interruption): the lock is held, and nothing else would release it.
    onFailure: (cause) => {
      if (acquired === undefined) return Effect.failCause(cause)
      heldToken = acquired.token
      return Effect.andThen(
        releaseBounded(backend, request, "an acquisition interrupted as it succeeded", undefined, acquired.fence),
        Effect.failCause(cause)
      )
    }
  })
}
