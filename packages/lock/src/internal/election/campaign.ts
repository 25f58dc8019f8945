// `Election.campaign` and `Election.run`: leadership is the election's lock held in a scope of its
// own (so `resign` can end it while the caller's scope stays open), the grant's fencing token is
// the term, and the first proclamation makes the leader known before `campaign` returns.
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as ElectionMetrics from "../../ElectionMetrics.ts"
import type { Leadership } from "../../Leadership.ts"
import type { Handle } from "../../Lease.ts"
import type { Elections } from "../../LockBackend.ts"
import { type InvalidArgument, type LockError, LockLost, type LockRedisError } from "../../LockError.ts"
import type { LeaseHandle } from "../lease.ts"
import { invalid } from "../settings.ts"

/** What every campaign of one election client shares. */
export interface Campaigns {
  /**
   * Holds the election's lock in the scope, as `Lock.acquire` does; `quiet` leaves out the warning
   * a lock held by a scope logs when it is lost (for `run`, which logs the loss itself).
   */
  readonly acquire: (
    name: string,
    waitMillis: number,
    interruptOnLoss: boolean,
    quiet: boolean
  ) => Effect.Effect<Handle, LockError, Scope.Scope>
  readonly elections: Elections
  readonly namespace: string
  /** The time limit of one proclamation or read. */
  readonly timeoutMillis: number
  /** How long a proclamation keeps trying through temporary failures. */
  readonly proclaimBudgetMillis: number
  readonly acknowledge: boolean
}

/** One campaign's own settings, checked. */
export interface Candidacy {
  readonly name: string
  readonly key: string
  readonly candidate: string
  readonly value: string
  /** How long to wait for the lead; `undefined` waits for as long as it takes. */
  readonly waitMillis: number | undefined
  readonly interruptOnLoss: boolean
  /** Whether a loss goes unlogged here (the caller logs it). */
  readonly quiet?: boolean | undefined
}

/** Waits for as long as it takes, in waits of this length (each a new place at the back of the line). */
const waitChunkMillis = 24 * 60 * 60 * 1000

/** A proclamation's value, checked. */
export const checkValue = (value: unknown): Effect.Effect<string, InvalidArgument> =>
  typeof value === "string" ? Effect.succeed(value) : Effect.fail(invalid("value", value, "must be a string"))

const notLeading = (campaigns: Campaigns, key: string): LockLost =>
  new LockLost({ key, namespace: campaigns.namespace, phase: "renew", reason: "ownership", bodyCompleted: false })

/**
 * Writes `value` as `term`'s record, trying temporary failures again within `budgetMillis` (by
 * default the client's proclamation budget).
 */
const proclaimAs = (
  campaigns: Campaigns,
  candidacy: Candidacy,
  term: number,
  value: string,
  budgetMillis: number = campaigns.proclaimBudgetMillis
): Effect.Effect<void, LockLost | LockRedisError> => {
  const request = {
    key: candidacy.key,
    term,
    candidate: candidacy.candidate,
    value,
    timeoutMillis: campaigns.timeoutMillis,
    acknowledge: campaigns.acknowledge
  }
  const attempt = (deadline: number): Effect.Effect<void, LockLost | LockRedisError> =>
    Effect.flatMap(Effect.result(campaigns.elections.proclaim(request)), (result) => {
      if (result._tag === "Success") {
        return result.success ? Effect.void : Effect.fail(notLeading(campaigns, candidacy.key))
      }
      const error = result.failure
      return Effect.flatMap(Clock.currentTimeMillis, (now) =>
        error.retryable && now < deadline ? Effect.andThen(Effect.sleep(50), attempt(deadline)) : Effect.fail(error)
      )
    })
  return Effect.flatMap(Clock.currentTimeMillis, (now) => attempt(now + budgetMillis))
}

/** Takes the election's lock in `scope`, waiting as the candidacy says. */
const acquireLead = (campaigns: Campaigns, candidacy: Candidacy): Effect.Effect<Handle, LockError, Scope.Scope> => {
  const attempt = (millis: number) =>
    campaigns.acquire(candidacy.name, millis, candidacy.interruptOnLoss, candidacy.quiet === true)
  if (candidacy.waitMillis !== undefined) return attempt(candidacy.waitMillis)
  const forever: Effect.Effect<Handle, LockError, Scope.Scope> = Effect.catchTag(
    attempt(waitChunkMillis),
    "TimedOut",
    () => forever
  )
  return forever
}

/**
 * `Some(value)` for work that completed while leading, confirmed: the lease still valid and, at the
 * server, the lock still this lead's. Work that completed after the lead was lost (a process paused
 * past its lease, a key lost on the server) fails with that `LockLost`, marked as completed. A
 * server that cannot be asked leaves the lease's own validity to decide.
 */
const confirmed = <A>(handle: Handle, value: A): Effect.Effect<Option.Option<A>, LockLost> =>
  Effect.matchEffect(handle.check, {
    onSuccess: () => Effect.succeed(Option.some(value)),
    onFailure: (error) =>
      error._tag === "LockLost"
        ? Effect.fail(new LockLost({ ...error, bodyCompleted: true }))
        : Effect.as(
            Effect.mapError(handle.ensure, (lost) => new LockLost({ ...lost, bodyCompleted: true })),
            Option.some(value)
          )
  })

/** Campaigns until this candidacy leads, proclaims its value, and returns its leadership. */
export const campaign = (
  campaigns: Campaigns,
  candidacy: Candidacy
): Effect.Effect<Leadership, LockError, Scope.Scope> =>
  Effect.withSpan(
    Effect.suspend(() => {
      const deadline = candidacy.waitMillis === undefined ? undefined : performance.now() + candidacy.waitMillis
      // A lock won whose first proclamation could not be written before its lease ran out (a
      // server that stopped taking writes, a lost key) is given back, and the campaign goes on
      // within what is left of the wait.
      const attempt: Effect.Effect<Leadership, LockError, Scope.Scope> = Effect.suspend(() => {
        const left = deadline === undefined ? undefined : Math.max(1, Math.floor(deadline - performance.now()))
        return Effect.flatMap(campaignOnce(campaigns, { ...candidacy, waitMillis: left }), (won) =>
          won === undefined ? attempt : Effect.succeed(won)
        )
      })
      return attempt
    }),
    "Election.campaign",
    { attributes: { "election.key": candidacy.key, "election.candidate": candidacy.candidate } }
  )

/** One campaign: the lead, or `undefined` when the lock was won but could not be proclaimed. */
const campaignOnce = (
  campaigns: Campaigns,
  candidacy: Candidacy
): Effect.Effect<Leadership | undefined, LockError, Scope.Scope> =>
  Effect.gen(function* () {
    const outer = yield* Scope.Scope
    const inner = yield* Scope.fork(outer, "sequential")
    let leading = false
    // Added first, so it runs last: after the release, observers are told to read again (nobody
    // may lead now, and no proclamation would tell them).
    yield* Scope.addFinalizer(
      inner,
      Effect.suspend(() =>
        leading ? campaigns.elections.announce(candidacy.key, campaigns.timeoutMillis) : Effect.void
      )
    )
    // Taken without interrupting this fiber on a loss: until `campaign` returns, a lost lock is the
    // campaign's to handle (it campaigns again), never an interruption of the caller.
    const handle = yield* Effect.onError(
      Scope.provide(acquireLead(campaigns, { ...candidacy, interruptOnLoss: false }), inner),
      () => Scope.close(inner, Exit.void)
    )
    leading = true
    const term = handle.fencingToken
    yield* Effect.annotateCurrentSpan("election.term", term)
    // The first proclamation may take as long as the lease lasts: until it is written, observers
    // do not know this leader. If it cannot be written in that time, or the lock is lost first,
    // the lock is given back.
    const proclaimed = yield* Effect.exit(
      Effect.raceFirst(
        proclaimAs(campaigns, candidacy, term, candidacy.value, Duration.toMillis(handle.remaining)),
        handle.lost
      )
    )
    if (Exit.isFailure(proclaimed)) {
      yield* Scope.close(inner, Exit.void)
      const failure = proclaimed.cause.reasons.find(Cause.isFailReason)?.error
      if (failure !== undefined && passing(failure)) return undefined
      return yield* Effect.failCause(proclaimed.cause)
    }
    // From here a loss nothing watches interrupts the caller, as the option says. A loss between
    // the proclamation and this point is the campaign's still.
    if (candidacy.interruptOnLoss) {
      const lostAlready = yield* Effect.withFiber((caller) =>
        Effect.sync(() => {
          const lease = handle as LeaseHandle
          lease.whenLost((watched) => watched || caller.interruptUnsafe())
          return lease.lostWith !== undefined
        })
      )
      if (lostAlready) {
        yield* Scope.close(inner, Exit.void)
        return undefined
      }
    }
    const attributes = { namespace: campaigns.namespace }
    yield* Metric.update(Metric.withAttributes(ElectionMetrics.terms, attributes), 1)
    const wonAt = yield* Clock.currentTimeMillis
    // Added after the lock's own finalizer, so it runs before the release: whether the lead was
    // lost is still the lease's to say.
    yield* Scope.addFinalizer(
      inner,
      Effect.gen(function* () {
        const held = yield* Effect.exit(handle.ensure)
        const outcome = Exit.isSuccess(held) ? "resigned" : "lost"
        const seconds = ((yield* Clock.currentTimeMillis) - wonAt) / 1000
        yield* Metric.update(
          Metric.withAttributes(ElectionMetrics.leadershipDuration, { ...attributes, outcome }),
          seconds
        )
      })
    )
    let value = candidacy.value
    let resigned = false
    const ended: Effect.Effect<void, LockLost> = Effect.catchIf(
      handle.lost,
      (lost) => lost.reason === "released",
      () => Effect.void
    )
    const leadership: Leadership = {
      name: candidacy.name,
      candidate: candidacy.candidate,
      term,
      lease: handle,
      value: Effect.sync(() => value),
      proclaim: (next) =>
        Effect.flatMap(checkValue(next), (checked) =>
          Effect.andThen(
            proclaimAs(campaigns, candidacy, term, checked),
            Effect.sync(() => {
              value = checked
            })
          )
        ),
      resign: Effect.uninterruptible(
        Effect.suspend(() => {
          if (resigned) return Effect.void
          resigned = true
          return Scope.close(inner, Exit.void)
        })
      ),
      ended,
      lead: (work) =>
        Effect.raceFirst(
          Effect.flatMap(work, (value) => confirmed(handle, value)),
          Effect.as(ended, Option.none())
        )
    }
    return leadership
  })

/** Whether `run` campaigns again after `error`: a lost lead, or a failure that may pass. */
const passing = (error: unknown): error is LockLost | LockRedisError =>
  typeof error === "object" &&
  error !== null &&
  ((error as { _tag?: unknown })._tag === "LockLost" ||
    ((error as { _tag?: unknown })._tag === "LockRedisError" && (error as LockRedisError).retryable))

/**
 * Campaigns, runs `work` while leading, and campaigns again `rejoinMillis` after the lead ends (lost,
 * resigned, or `work` returned), until interrupted.
 */
export const run = <E, R>(
  campaigns: Campaigns,
  candidacy: Candidacy,
  rejoinMillis: number,
  work: (leadership: Leadership) => Effect.Effect<unknown, E, R>
): Effect.Effect<never, E | InvalidArgument | LockRedisError, R> => {
  const term = Effect.scoped(
    Effect.flatMap(campaign(campaigns, { ...candidacy, interruptOnLoss: false, quiet: true }), (leadership) =>
      Effect.andThen(leadership.lead(work(leadership)), leadership.resign)
    )
  )
  const once = Effect.catchIf(term, passing, (error) =>
    Effect.logWarning(`election ${candidacy.key}: the lead ended (${error.message}); campaigning again`)
  ) as Effect.Effect<void, E | InvalidArgument | LockRedisError, R>
  return Effect.forever(Effect.andThen(once, Effect.sleep(rejoinMillis)))
}
