/**
 * Leader election for Effect programs, on Redis and Valkey: one leader at a time per election name,
 * a term number per leadership, and a stream of who leads that any process can watch.
 *
 * `campaign(name)` waits for the lead and holds it for the lifetime of a `Scope`; the returned
 * `Leadership` has the term (the grant's fencing token: every later leader's is higher),
 * `proclaim(value)` to update what observers see, `resign` to hand over now, and `lead(work)` to run
 * work that stops when the lead is lost. `observe(name)` streams every change of leader, in term
 * order; `leader(name)` reads it once; `run(name, work)` is the service loop that campaigns again
 * after each term.
 *
 * **Guarantees and limits**
 * - Leadership is a lock (`Lock`): it has the lock's lease, renewal, loss detection and fair line,
 *   on every backend. A process paused past its lease can still believe it leads: the term is the
 *   fencing token to give the resources it writes to (see `docs/fencing.md`).
 * - Observers never see terms go back, a term that ended come back, or two leaders at once. They are
 *   told of each proclamation at once, and read again at least every `observeInterval` (a missed
 *   message, or a leader that crashed with nobody to take over, costs that much at most).
 *
 * @since 0.2.1
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as KeyCodec from "./KeyCodec.ts"
import type { Leadership } from "./Leadership.ts"
import { LockBackend, type LeaderRecord } from "./LockBackend.ts"
import type { InvalidArgument, LockError, LockRedisError } from "./LockError.ts"
import * as Calls from "./internal/calls.ts"
import * as Campaign from "./internal/election/campaign.ts"
import { observe as observeKey } from "./internal/election/observe.ts"
import { encodeKey } from "./internal/encodeKey.ts"
import { checkOptions, invalid, makeSettings, positiveMillis } from "./internal/settings.ts"
import { acquireScoped } from "./internal/scoped.ts"
import { newToken } from "./internal/token.ts"
import type { Warnings } from "./internal/warnings.ts"

/**
 * Who leads an election: the term, the candidate's id, what it proclaimed last, since when (ms since
 * the epoch, on the server's clock) and how many times it proclaimed in this term (`revision`).
 *
 * @category models
 * @since 0.2.1
 */
export type Leader = LeaderRecord

/**
 * Options of an election client. Validated once, when the client or layer is built.
 *
 * @category options
 * @since 0.2.1
 */
export interface ElectionOptions {
  /**
   * How long a leader's lease lasts without renewal: how long an election can go without a leader
   * after a leader's process dies. Defaults to 15 seconds; at least 30 milliseconds.
   */
  readonly leaseDuration?: Duration.Input | undefined
  /** Prefix of every election key. Defaults to `"election"`. */
  readonly namespace?: string | undefined
  /** On Sentinel and Cluster, wait for replicas to acknowledge grants, renewals and proclamations. Defaults to `true`. */
  readonly replicaAcknowledgement?: boolean | undefined
  /** This client's candidate id, shown to observers. Defaults to a random id; a campaign can give its own. */
  readonly candidate?: string | undefined
  /**
   * How often an observer reads the leader when it hears nothing: the longest a missed message, or a
   * dead leader's lease running out with nobody to take over, goes unseen past its time. Defaults to
   * 1 second.
   */
  readonly observeInterval?: Duration.Input | undefined
}

/**
 * Per-call options of `campaign`.
 *
 * @category options
 * @since 0.2.1
 */
export interface CampaignOptions {
  /** What observers see of this leader until it proclaims something else. Defaults to `""`. */
  readonly value?: string | undefined
  /** The candidate id for this campaign. Defaults to the client's. */
  readonly candidate?: string | undefined
  /** How long to wait for the lead, then fail with `TimedOut`. Defaults to as long as it takes. */
  readonly waitTimeout?: Duration.Input | undefined
  /**
   * When the lead is lost while the scope is open and nothing waits on `ended` or `lease.lost`,
   * interrupt the fiber that called `campaign`. Defaults to `true`. It applies once `campaign` has
   * returned: a lock lost before its first proclamation was written is given back and the campaign
   * goes on, within its `waitTimeout`.
   */
  readonly interruptOnLoss?: boolean | undefined
}

/**
 * Options of `run`.
 *
 * @category options
 * @since 0.2.1
 */
export interface RunOptions {
  /** As for `campaign`: what each term proclaims first. */
  readonly value?: string | undefined
  /** As for `campaign`. */
  readonly candidate?: string | undefined
  /** How long to wait after a term ends before campaigning again. Defaults to 1 second. */
  readonly rejoinDelay?: Duration.Input | undefined
}

/**
 * An election client.
 *
 * @category models
 * @since 0.2.1
 */
export interface ElectionClient {
  /** The validated namespace. */
  readonly namespace: string
  /** The validated lease. */
  readonly leaseDuration: Duration.Duration
  /** This client's candidate id. */
  readonly candidate: string
  /**
   * Waits for the lead of `name` and holds it until the scope closes or the leader resigns; the
   * value is proclaimed before it returns (a lead whose first proclamation cannot be written within
   * its lease is given back, and the campaign goes on). Fails with `TimedOut` (only with a
   * `waitTimeout`), `InvalidArgument` or a `LockRedisError` that is not temporary.
   */
  readonly campaign: (name: string, options?: CampaignOptions) => Effect.Effect<Leadership, LockError, Scope.Scope>
  /** Who leads `name` now: `None` when nobody leads, or the leader has not proclaimed yet. */
  readonly leader: (name: string) => Effect.Effect<Option.Option<Leader>, InvalidArgument | LockRedisError>
  /**
   * Who leads `name`, now and at every change: the state at subscription first, then each new term,
   * each proclamation of the term shown (higher `revision`), and `None` when a term ends with nobody
   * proclaimed after it. Terms never go back. Temporary failures are read through; the stream fails
   * only on a failure that is not temporary.
   */
  readonly observe: (name: string) => Stream.Stream<Option.Option<Leader>, InvalidArgument | LockRedisError>
  /**
   * The service loop: campaign for `name`, run `work` while leading (interrupted when the lead is
   * lost), and campaign again after the lead ends, until interrupted. Fails only with `work`'s
   * failure, `InvalidArgument`, or a `LockRedisError` that is not temporary.
   */
  readonly run: <E, R>(
    name: string,
    work: (leadership: Leadership) => Effect.Effect<unknown, E, R>,
    options?: RunOptions
  ) => Effect.Effect<never, E | InvalidArgument | LockRedisError, R>
}

/**
 * The election service, as provided by `Election.layer`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Election } from "@sage/lock"
 *
 * // The nightly scheduler runs in exactly one process of the fleet.
 * const scheduler = Effect.gen(function*() {
 *   const elections = yield* Election.Election
 *   return yield* elections.run("scheduler", (leadership) =>
 *     Effect.log(`scheduling in term ${leadership.term}`).pipe(Effect.andThen(Effect.never))
 *   )
 * })
 * ```
 *
 * @category services
 * @since 0.2.1
 */
export class Election extends Context.Service<Election, ElectionClient>()("@sage/lock/Election") {}

const defaultLeaseMillis = 15_000
const defaultObserveMillis = 1_000
const defaultRejoinMillis = 1_000

const toLeader = (view: { readonly _tag: string; readonly record?: LeaderRecord }): Option.Option<Leader> =>
  view.record === undefined ? Option.none() : Option.some(view.record)

const checkCandidate = (field: string, candidate: unknown): Effect.Effect<string, InvalidArgument> =>
  typeof candidate === "string" && candidate.length > 0
    ? Effect.succeed(candidate)
    : Effect.fail(invalid(field, candidate, "must be a non-empty string"))

const optionalMillis = (field: string, input: unknown, fallback: number | undefined) =>
  input === undefined ? Effect.succeed(fallback) : positiveMillis(field, input)

/**
 * Builds an election client over the `LockBackend` in context. Its renewal scheduler lives in the
 * scope.
 *
 * **Details**
 * Fails with `InvalidArgument` on the options a lock client refuses (see `Lock.make`), a bad
 * `candidate` or `observeInterval`, or a backend without elections.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { Election } from "@sage/lock"
 *
 * const program = Effect.gen(function*() {
 *   const elections = yield* Election.make({ namespace: "billing", candidate: "worker-7" })
 *   // Print every change of leader.
 *   yield* elections.observe("invoicer").pipe(Stream.runForEach((leader) => Effect.log(leader)))
 * })
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const make: (
  options?: ElectionOptions
) => Effect.Effect<ElectionClient, InvalidArgument | LockRedisError, LockBackend | Scope.Scope> = Effect.fnUntraced(
  function* (options: ElectionOptions = {}) {
    yield* checkOptions(options)
    const leaseDuration = options.leaseDuration ?? defaultLeaseMillis
    const settings = yield* makeSettings({ ...options, leaseDuration, namespace: options.namespace ?? "election" })
    const candidate = yield* checkCandidate("candidate", options.candidate ?? `candidate-${newToken()}`)
    const observeMillis = (yield* optionalMillis("observeInterval", options.observeInterval, defaultObserveMillis))!
    const service = yield* LockBackend
    const backend = service.connected === undefined ? service : yield* service.connected
    const elections = backend.elections
    if (elections === undefined) {
      return yield* invalid("backend", backend.description, "does not support elections (it has no `elections`)")
    }
    // The election's locks: a lock client's machinery (renewal scheduler, metrics, warnings) under
    // the election's namespace and lease.
    const shared = yield* Calls.makeShared(backend, settings)
    const quietWarnings: Warnings = {
      warn: (kind, key, message, cause) =>
        kind === "scopeLost" ? Effect.void : shared.warnings.warn(kind, key, message, cause)
    }
    const acquire: Campaign.Campaigns["acquire"] = (name, waitMillis, interruptOnLoss, quiet) =>
      acquireScoped(
        (body) => Calls.withLock(shared, KeyCodec.string, name, waitMillis, body),
        interruptOnLoss,
        quiet ? quietWarnings : shared.warnings
      )
    const timeoutMillis = Math.max(50, Math.min(2_000, Math.floor(settings.usableLeaseMillis / 4)))
    const campaigns: Campaign.Campaigns = {
      acquire,
      elections,
      namespace: settings.namespace,
      timeoutMillis,
      proclaimBudgetMillis: Math.max(timeoutMillis, Math.floor(settings.usableLeaseMillis / 3)),
      acknowledge: settings.replicaAcknowledgement
    }
    const keyOf = (name: string): Effect.Effect<string, InvalidArgument> =>
      Effect.fromResult(encodeKey(KeyCodec.string, settings.namespace, name))
    const candidacy = (name: string, given: CampaignOptions, interruptOnLoss: boolean) =>
      Effect.gen(function* () {
        yield* checkOptions(given)
        return {
          name,
          key: yield* keyOf(name),
          candidate: given.candidate === undefined ? candidate : yield* checkCandidate("candidate", given.candidate),
          value: yield* Campaign.checkValue(given.value ?? ""),
          waitMillis: yield* optionalMillis("waitTimeout", given.waitTimeout, undefined),
          interruptOnLoss
        } satisfies Campaign.Candidacy
      })
    const client: ElectionClient = {
      namespace: settings.namespace,
      leaseDuration: Duration.millis(settings.leaseMillis),
      candidate,
      campaign: (name, given = {}) => {
        const interruptOnLoss: unknown = given?.interruptOnLoss
        if (interruptOnLoss !== undefined && typeof interruptOnLoss !== "boolean") {
          return Effect.fail(invalid("interruptOnLoss", interruptOnLoss, "must be a boolean"))
        }
        return Effect.flatMap(candidacy(name, given, interruptOnLoss !== false), (checked) =>
          Campaign.campaign(campaigns, checked)
        )
      },
      leader: (name) => Effect.flatMap(keyOf(name), (key) => Effect.map(elections.read(key, timeoutMillis), toLeader)),
      observe: (name) => {
        const key = encodeKey(KeyCodec.string, settings.namespace, name)
        return Result.isFailure(key)
          ? Stream.fail(key.failure)
          : observeKey(backend, elections, key.success, observeMillis, timeoutMillis, settings.namespace)
      },
      run: (name, work, given = {}) =>
        Effect.gen(function* () {
          const checked = yield* candidacy(name, { value: given.value, candidate: given.candidate }, false)
          const rejoinMillis = (yield* optionalMillis("rejoinDelay", given.rejoinDelay, defaultRejoinMillis))!
          return yield* Campaign.run(campaigns, checked, rejoinMillis, work)
        })
    }
    return client
  }
)

/**
 * The `Election` service over the `LockBackend` in context.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Election } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const ElectionLive = Election.layer({ leaseDuration: "10 seconds" }).pipe(
 *   Layer.provide(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379" }))
 * )
 * ```
 *
 * @category layers
 * @since 0.2.1
 */
export const layer = (
  options?: ElectionOptions
): Layer.Layer<Election, InvalidArgument | LockRedisError, LockBackend> => Layer.effect(Election, make(options))

/**
 * `campaign` of the `Election` service.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Election } from "@sage/lock"
 *
 * const migrate = Effect.scoped(
 *   Effect.gen(function*() {
 *     const leadership = yield* Election.campaign("migrations", { value: "10.0.0.7:8080" })
 *     yield* leadership.lead(Effect.log(`migrating, term ${leadership.term}`))
 *   })
 * )
 * ```
 *
 * @category accessors
 * @since 0.2.1
 */
export const campaign = (
  name: string,
  options?: CampaignOptions
): Effect.Effect<Leadership, LockError, Scope.Scope | Election> =>
  Election.use((election) => election.campaign(name, options))

/**
 * `leader` of the `Election` service.
 *
 * @category accessors
 * @since 0.2.1
 */
export const leader = (
  name: string
): Effect.Effect<Option.Option<Leader>, InvalidArgument | LockRedisError, Election> =>
  Election.use((election) => election.leader(name))

/**
 * `observe` of the `Election` service.
 *
 * @category accessors
 * @since 0.2.1
 */
export const observe = (
  name: string
): Stream.Stream<Option.Option<Leader>, InvalidArgument | LockRedisError, Election> =>
  Stream.unwrap(Election.useSync((election) => election.observe(name)))

/**
 * `run` of the `Election` service.
 *
 * @category accessors
 * @since 0.2.1
 */
export const run = <E, R>(
  name: string,
  work: (leadership: Leadership) => Effect.Effect<unknown, E, R>,
  options?: RunOptions
): Effect.Effect<never, E | InvalidArgument | LockRedisError, R | Election> =>
  Election.use((election) => election.run(name, work, options))
