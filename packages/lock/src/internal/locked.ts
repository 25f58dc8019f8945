// The machinery of one locked call: key encoding, the token, acquisition, the body raced against
// loss, and the release. `Lock.ts` is the public face; everything a call does lives here.
//
// Cost matters here: this runs for every `withLock`. The body runs in a fiber of its own (so that
// loss can interrupt it without interrupting the caller); renewal is the client's shared scheduler
// (`renewals.ts`), not a fiber or timer per lock; the backend keeps its own time limits, so no call
// is wrapped in a racing timer; metrics are pre-bound to their attributes; spans capture no stack.
// The call reads its fiber's clock and context once, and every step that needs neither a new fiber
// nor an asynchronous wait is plain code inside the steps that remain: an uncontended call over
// node-redis takes 18 Effect steps, and at tens of thousands of calls a second each step shows in the
// client's CPU.
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { Lease } from "../Lease.ts"
import type { Backend, LeaseRequest, Permits } from "../LockBackend.ts"
import { type LockError, LockLost } from "../LockError.ts"
import { acquire } from "./acquire.ts"
import type { AcquireOutcome, Caller, HeldLease } from "./acquisition.ts"
import type * as AttemptSlots from "./attemptSlots.ts"
import { LeaseHandle } from "./lease.ts"
import type * as LocalQueue from "./localQueue.ts"
import type * as Metrics from "./metrics.ts"
import { releaseBounded, releaseNow, type ReleaseOutcome } from "./release.ts"
import { releaseVerdict } from "./releaseVerdict.ts"
import * as Renewals from "./renewals.ts"
import * as StaleGrants from "./staleGrants.ts"
import * as Transfer from "./transfer.ts"
import type { Settings } from "./settings.ts"
import { monotonicMillis } from "./time.ts"
import { newToken } from "./token.ts"
import { annotate, type CallTrace, event } from "./tracing.ts"
import type * as Warnings from "./warnings.ts"

/** What every call of one lock client shares. */
export interface Client {
  readonly backend: Backend
  readonly settings: Settings
  readonly renewals: Renewals.Renewals
  readonly queue: LocalQueue.LocalQueue<Transfer.Grant>
  readonly metrics: Metrics.ClientMetrics
  /** How many acquire attempts this client has on the wire at once. */
  readonly attemptSlots: AttemptSlots.AttemptSlots
  /** This client's id in the servers' waiter queues (one contender per client and key). */
  readonly waiterId: string
  /** The warnings about its calls (releases that did not go as planned, scoped losses), ten a second. */
  readonly warnings: Warnings.Warnings
  /** Grants of this client whose release failed: the next acquisition must not take them again. */
  readonly staleGrants: StaleGrants.StaleGrants
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

const releaseResults = { Released: "released", Gone: "gone", NotOwner: "not-owner", Failed: "failed" } as const

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
  /**
   * A semaphore's permits: the call holds `count` of them rather than a lock, as one of several
   * callers of its client on the key (no in-process turn), waiting under `waiterId`.
   */
  readonly permits?: Permits | undefined
  /** The call's own waiter id (a semaphore's callers each wait in the server's line). */
  readonly waiterId?: string | undefined
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
): Effect.Effect<B, E | LockError, Exclude<R, Lease>> =>
  new LockedCall(client, call, body as Effect.Effect<A, E>, found, busy, restore).start()

/**
 * One locked call's state, and its steps as methods: one object a call (and a held lock), where
 * closures over the same state made most of a call's garbage and most of a held lock's heap.
 *
 * No closure made per call is kept in a field, here or in what the call hands on (the acquisition's
 * `Caller` and the renewal's `Holder` are this object). V8 may start allocating such closures, and
 * what holds them, straight in the old generation once enough of them survive a collection, and an
 * old object keeps whatever it points to alive until a full collection: a `request` closure kept in
 * a field here made every call three times dearer in garbage collection, and the callbacks in the
 * acquisition's parameters did the same in some runs.
 */
class LockedCall<A, E, B> implements Caller, Renewals.Holder {
  readonly token: string
  /** The token the lock is held with: the call's own, or the one a release granted it under. */
  heldToken: string
  /** The fencing token the lock is held with, once held: sent with every release attempt (release.ts). */
  heldFence: number | undefined = undefined
  /** When the lock was acquired (monotonic ms), recorded in the metrics once the body has started. */
  acquiredAt = 0
  /** The lease the acquisition got, once it has got one. */
  acquired: HeldLease | undefined = undefined
  /** Until when (monotonic ms) the lease could be relied on when the body ended. */
  validUntil = Infinity
  /** The lease the body is given, once held. */
  lease: LeaseHandle | undefined = undefined
  /** The body's fiber, once started. */
  fiber: Fiber.Fiber<A, E> | undefined = undefined
  /** The lease's entry in the client's renewal scheduler, once held. */
  renewal: Renewals.Renewal | undefined = undefined

  readonly client: Client
  readonly call: Call
  readonly body: Effect.Effect<A, E>
  readonly found: (value: A) => B
  readonly busy: Effect.Effect<B>
  readonly restore: LocalQueue.Restore

  constructor(
    client: Client,
    call: Call,
    body: Effect.Effect<A, E>,
    found: (value: A) => B,
    busy: Effect.Effect<B>,
    restore: LocalQueue.Restore
  ) {
    this.client = client
    this.call = call
    this.body = body
    this.found = found
    this.busy = busy
    this.restore = restore
    const grant = call.grant
    this.token = grant === undefined ? newToken() : grant.token
    this.heldToken = this.token
    if (grant !== undefined) grant.claimed = true
  }

  start(): Effect.Effect<B, E | LockError> {
    const grant = this.call.grant
    const start = grant?.sentAt !== undefined ? this.transferred(grant.sentAt) : this.restore(this.acquisition())
    return Effect.matchCauseEffect(start, {
      onSuccess: (outcome: AcquireOutcome) => (outcome._tag === "Busy" ? this.busy : this.hold(outcome.lease)),
      onFailure: (cause) => this.notAcquired(cause)
    })
  }

  /** Built when it is to run (it starts when built): a grant may make it unnecessary. */
  acquisition(): Effect.Effect<AcquireOutcome, LockError> {
    const { client, call } = this
    return acquire({
      backend: client.backend,
      settings: client.settings,
      key: call.key,
      token: this.token,
      startedAt: call.startedAt,
      deadline: call.deadline,
      mode: call.mode,
      waitedBehind: call.waitedBehind,
      // A transfer whose outcome is unknown: the key may hold this token already.
      uncertain: call.grant !== undefined,
      waiterId: call.waiterId ?? client.waiterId,
      permits: call.permits,
      staleFence:
        client.staleGrants.size === 0
          ? undefined
          : StaleGrants.fenceOf(client.staleGrants, call.key, monotonicMillis(call.clock)),
      caller: this,
      unavailable: client.queue.setUnavailable,
      slots: client.attemptSlots,
      trace: call.trace,
      clock: call.clock
    })
  }

  /** Whether another fiber of this client waits for the key (the acquisition's `Caller`). */
  hasSuccessor(): boolean {
    return this.call.permits === undefined && this.client.queue.hasWaiters(this.call.key)
  }

  /** How the acquisition ended (the acquisition's `Caller`). */
  settled(exit: Exit.Exit<AcquireOutcome, unknown>, end: number): void {
    // A lock that was acquired is counted once its body has started (see `hold`).
    if (Exit.isSuccess(exit) && exit.value._tag === "Held") {
      this.acquiredAt = end
      this.acquired = exit.value.lease
    } else this.client.metrics.acquisition(this.call.context, exit, this.call.startedAt, end)
  }

  /**
   * A transfer that is known to have happened in time is held at once; otherwise (its outcome
   * unknown, or its reply too late to rely on) this call acquires with the transferred token.
   */
  transferred(sentAt: number): Effect.Effect<AcquireOutcome, LockError> {
    const { call } = this
    const now = monotonicMillis(call.clock)
    if (now >= sentAt + this.client.settings.usableLeaseMillis) return this.restore(this.acquisition())
    event(call.trace, "lock.attempt", transferredAttempt)
    annotate(call.trace, acquiredOutcome)
    this.acquiredAt = now
    return Effect.succeed({
      _tag: "Held",
      lease: { key: call.key, token: this.token, sentAt, fence: call.grant!.fence }
    })
  }

  /**
   * Interrupted as the acquisition succeeded (its success reached the end of the interruptible part
   * together with the interruption): the lock is held, and nothing else would release it.
   */
  notAcquired(cause: Cause.Cause<LockError>): Effect.Effect<never, LockError> {
    const acquired = this.acquired
    if (acquired === undefined) return Effect.failCause(cause)
    this.heldToken = acquired.token
    return Effect.andThen(
      releaseBounded(
        this.client.backend,
        this.releaseRequest(),
        "an acquisition interrupted as it succeeded",
        undefined,
        acquired.fence
      ),
      Effect.failCause(cause)
    )
  }

  request(timeoutMillis: number): LeaseRequest {
    return {
      key: this.call.key,
      token: this.heldToken,
      leaseMillis: this.client.settings.leaseMillis,
      timeoutMillis,
      acknowledge: false,
      permits: this.call.permits
    }
  }

  /**
   * The request of a release of the held lease, with its fencing token (see `LeaseRequest.fence`), as a
   * function: made when asked for, never kept in a field (see above).
   */
  releaseRequest(): (timeoutMillis: number) => LeaseRequest {
    return (timeoutMillis) => ({
      key: this.call.key,
      token: this.heldToken,
      leaseMillis: this.client.settings.leaseMillis,
      timeoutMillis,
      acknowledge: false,
      fence: this.heldFence,
      permits: this.call.permits
    })
  }

  hold(held: HeldLease): Effect.Effect<B, E | LockError> {
    const { client, call } = this
    this.heldToken = held.token
    this.heldFence = held.fence
    const lease = new LeaseHandle(
      call.key,
      client.settings.namespace,
      held.fence,
      held.token,
      client.backend,
      client.renewals,
      call.clock
    )
    this.lease = lease
    const renewal = Renewals.lease(client.settings, held, call.trace, this, call.permits)
    this.renewal = renewal
    client.renewals.register(renewal)
    return this.run()
  }

  /** The renewal found the lock lost (the lease's `Holder`): the lease says so, and the body is stopped. */
  lost(error: LockLost): void {
    this.lease!.lose(error)
    event(this.call.trace, "lock.lost", { "lock.lost.phase": error.phase, "lock.lost.reason": error.reason })
    this.fiber?.interruptUnsafe()
  }

  /**
   * The body starts at once, in its own fiber with the caller's context and the lease: a fiber made
   * directly rather than with `Effect.forkChild`, which costs three Effect steps more per call. It is
   * not the caller's child, so the caller waits for it and interrupts it itself, on every path below.
   */
  run(): Effect.Effect<B, E | LockError> {
    const { call } = this
    const lease = this.lease!
    lease.renewal = this.renewal
    // A semaphore's permits count in its gauge from the body's start to its end (`afterBody`).
    if (call.permits !== undefined) this.client.metrics.permitsHeld(call.context, call.permits.count)
    const forked = Effect.runForkWith(Context.add(call.context, Lease, lease) as Context.Context<never>)(this.body)
    this.fiber = forked
    // Counted here rather than before the fork: metric updates are not free, and the body
    // starting sooner is what a waiter handed the lock is waiting for.
    this.client.metrics.acquired(call.context, call.startedAt, this.acquiredAt)
    if (lease.lostWith !== undefined) forked.interruptUnsafe()
    const done = forked.pollUnsafe()
    if (done !== undefined) return this.afterBody(done)
    return Effect.flatMap(Effect.exit(this.restore(Fiber.await(forked))), (awaited) =>
      // Interrupted while the body ran: stop the body and wait for its finalizers. Only then does
      // the call end the lease and start the release (built when it runs: its bound starts then).
      Exit.isSuccess(awaited)
        ? this.afterBody(awaited.value)
        : Effect.andThen(
            Fiber.interrupt(forked),
            Effect.suspend(() => this.afterBody(Exit.failCause(awaited.cause)))
          )
    )
  }

  afterBody(bodyExit: Exit.Exit<A, E>): Effect.Effect<B, E | LockError> {
    const { permits } = this.call
    if (permits !== undefined) this.client.metrics.permitsHeld(this.call.context, -permits.count)
    const renewal = this.renewal!
    this.client.renewals.unregister(renewal)
    this.validUntil = renewal.validUntil
    const lost = this.lease!.release()
    const exit: Exit.Exit<A, E | LockLost> =
      lost !== undefined && Exit.isFailure(bodyExit) && Cause.hasInterrupts(bodyExit.cause)
        ? lostExit(lost, bodyExit.cause)
        : bodyExit
    this.client.metrics.run(this.call.context, exit)
    return this.releaseAndPass((released) => this.finish(exit, released))
  }

  finish(exit: Exit.Exit<A, E | LockLost>, released: ReleaseOutcome): Effect.Effect<B, E | LockError> {
    const { call, client } = this
    event(call.trace, "lock.release", { "lock.release.result": releaseResults[released._tag] })
    // Held under a release's grant (`<waiter id>:<fence>`) and not released: see staleGrants.ts.
    if (
      released._tag === "Failed" &&
      this.heldToken !== this.token &&
      this.heldFence !== undefined &&
      call.permits === undefined
    ) {
      const until = monotonicMillis(call.clock) + client.settings.leaseMillis
      StaleGrants.remember(client.staleGrants, call.key, this.heldFence, until)
    }
    // The body's own failure or interruption (or LockLost from renewal) always wins over release.
    if (Exit.isFailure(exit)) return Effect.failCause(exit.cause)
    const verdict = releaseVerdict(client, call.key, call.trace, this.validUntil, released)
    return verdict === undefined ? Effect.succeed(this.found(exit.value)) : Effect.as(verdict, this.found(exit.value))
  }

  /**
   * With a backend that can transfer, a waiting fiber of this client gets the key without it ever
   * being free: one round trip, and no other process can slip in (bounded, see transfer.ts).
   * Otherwise, over an ordered backend, the next fiber of this client may ask for the key at once,
   * right behind the release: its acquisition follows the release on the connection and finds the
   * key free, one round trip after the body instead of two. The turn is handed on in a microtask,
   * which runs once this fiber has sent the release and waits for its reply (a resumed fiber runs
   * at once, inside `resume`: handed on here, the next fiber would send first and find the key busy).
   */
  releaseAndPass(
    after: (released: ReleaseOutcome) => Effect.Effect<B, E | LockError>
  ): Effect.Effect<B, E | LockError> {
    const { client, call } = this
    const { backend, queue } = client
    const key = call.key
    const passTurn = call.passTurn
    if (passTurn === undefined) return releaseNow(backend, this.releaseRequest(), this.heldFence, call.clock, after)
    const transfer = backend.transfer
    if (transfer !== undefined && Transfer.mayTransfer(queue, key)) {
      return Effect.flatMap(
        Transfer.handOn({
          backend,
          transfer,
          settings: client.settings,
          queue,
          key,
          token: this.heldToken,
          fence: this.heldFence,
          waiterId: client.waiterId,
          passTurn,
          newToken
        }),
        after
      )
    }
    queue.setStreak(key, 0)
    if (backend.ordered === true && queue.hasWaiters(key)) queueMicrotask(passTurn)
    return releaseNow(backend, this.releaseRequest(), this.heldFence, call.clock, after)
  }
}
