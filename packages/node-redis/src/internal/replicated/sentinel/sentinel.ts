// The Sentinel topology: which node is the master, and how many healthy replicas it has, as the
// sentinels report it. Lock operations go to that master on dedicated connections; this module only
// keeps the view.
//
// It asks the sentinels itself instead of running node-redis's Sentinel client, whose connect waits
// for every sentinel and replica connection in turn with no bound of its own: one stalled (SIGSTOP)
// sentinel or replica held the layer, the calls waiting on it and the shutdown until it resumed.
// Here every sentinel has its own small client, every question carries its own timeout and is
// asked of all sentinels at once, data nodes are never connected to (replicas are only counted), and
// closing destroys the clients without waiting for anyone (sentinels.ts). The view is refreshed
// every second and at once when an operation meets a stale one; sentinels the others report are
// asked too. Wake-ups use a connection to the master of the view (masterSubscriber.ts).
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import * as Address from "../../connection/address.ts"
import { replicaAddresses } from "../acknowledgement.ts"
import type { Topology } from "../topology.ts"
import type { Classify } from "../../connection/failures.ts"
import type { Links } from "./links.ts"
import { masterSubscriber } from "./masterSubscriber.ts"
import { type Answer, ask, type Client, type SentinelClients, sentinelClients, type View } from "./sentinels.ts"

const refreshEveryMillis = 1_000

/**
 * Shared connections to a Sentinel master: every lock operation goes to that one server, so it gets
 * two, as the standalone layer does; a Cluster client keeps one per master (see `Pool.make`).
 */
export const sharedLanes = 2

/**
 * A Sentinel master takes every acquisition, so acknowledged ones that come together are committed
 * as a group (one `ROLE` and one `WAIT` for several scripts); on Cluster batches per master stay
 * small and it did not pay (see `replicated/groupCommit/`).
 */
export const backendOptions = { groupCommit: true } as const

const noMaster = (name: string, why: string): LockRedisError =>
  new LockRedisError({
    command: "route",
    kind: "server",
    code: "MASTERDOWN",
    reply: `the sentinels know no master for ${name} right now (${why})`,
    retryable: true,
    mayHaveExecuted: false
  })

export interface SentinelOptions {
  readonly name: string
  readonly sentinels: ReadonlyArray<Address.HostPort>
  /** The connections to the sentinels and the wake-up subscriber's to the master. */
  readonly links: Links
  readonly description: string
}

/** The view the sentinels' answers build, and one round of questions to all of them. */
interface Views {
  view: View | undefined
  /** Why no master is known, for the failures that say so. */
  lastWhy: string
  /** Done once a view names a master. */
  readonly found: Deferred.Deferred<void>
  /** Asks every sentinel at once; each answer is adopted as it arrives (`adopt`). */
  readonly observe: Effect.Effect<ReadonlyArray<Answer>>
}

/**
 * Connects to the sentinels and waits, at most `timeoutMillis`, for a first view of the master.
 * Fails at once with `InvalidArgument` when every sentinel that answers monitors no master called
 * `name`. The clients close with the scope, without waiting for stalled peers.
 */
export const connect = (
  options: SentinelOptions,
  timeoutMillis: number
): Effect.Effect<Topology, LockRedisError | InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    const { name } = options
    const { links } = options
    const sentinels = yield* sentinelClients(options.sentinels, links)
    const views = viewsOf(name, sentinels, links)
    yield* firstView(views, name, sentinels.clients, timeoutMillis, links.classify)

    // Kept current in the background; `refresh` asks at once (one question in flight at a time).
    let refreshing = false
    const refreshNow = Effect.suspend(() => {
      if (refreshing) return Effect.void
      refreshing = true
      return views.observe.pipe(Effect.ensuring(Effect.sync(() => (refreshing = false))))
    })
    const scope = yield* Effect.scope
    const subscriberLinks = links.subscriber
    const wakeups =
      subscriberLinks === undefined
        ? undefined
        : yield* masterSubscriber(() => views.view?.master, { subscriber: subscriberLinks, destroy: links.destroy })
    const follow = wakeups?.follow ?? Effect.void
    yield* Effect.forkScoped(
      Effect.forever(Effect.sleep(refreshEveryMillis).pipe(Effect.andThen(refreshNow), Effect.andThen(follow)))
    )

    const refresh = Effect.asVoid(Effect.forkIn(refreshNow.pipe(Effect.andThen(follow)), scope))
    const departed = departures(views, refresh)

    return {
      description: options.description,
      route: () => {
        const view = views.view
        return view?.master === undefined
          ? Result.fail(noMaster(name, views.lastWhy))
          : Result.succeed({
              address: Address.format(view.master),
              replicas: view.replicas,
              knownReplicas: view.knownReplicas,
              departed
            })
      },
      isMaster: (_key, address) => views.view?.master !== undefined && Address.format(views.view.master) === address,
      refresh: () => refresh,
      publish: "PUBLISH",
      subscriber: wakeups === undefined ? undefined : () => Promise.resolve(wakeups.subscriber)
    } satisfies Topology
  })

const viewsOf = (name: string, sentinels: SentinelClients, links: Links): Views => {
  const views: Views = {
    view: undefined,
    lastWhy: "no sentinel answered",
    found: Deferred.makeUnsafe<void>(),
    observe: Effect.suspend(() =>
      Effect.forEach(
        [...sentinels.clients],
        (client) =>
          Effect.tap(ask(client, name, links.classify), (answer) => Effect.sync(() => adopt(views, sentinels, answer))),
        { concurrency: "unbounded" }
      )
    )
  }
  return views
}

/**
 * Each answer counts as soon as it arrives: a sentinel that stalls mid-question delays no one.
 * A newer epoch (a finished failover) always wins; an older one (a sentinel that missed it)
 * never does; at the same epoch, an answer naming a master replaces one that names none.
 */
const adopt = (views: Views, sentinels: SentinelClients, answer: Answer): void => {
  if (answer === "unknown" || answer instanceof LockRedisError) return
  const view = views.view
  if (view === undefined || answer.epoch > view.epoch || (answer.epoch === view.epoch && answer.master !== undefined)) {
    views.view = answer
  }
  sentinels.discover(answer.sentinels)
  if (views.view!.master !== undefined) Deferred.doneUnsafe(views.found, Effect.void)
}

/**
 * Asks until the sentinels name a master, at most `timeoutMillis`; `InvalidArgument` as soon as the
 * sentinels that answer agree that they monitor no master called `name`.
 */
const firstView = (
  views: Views,
  name: string,
  clients: ReadonlyArray<Client>,
  timeoutMillis: number,
  classify: Classify
): Effect.Effect<void, LockRedisError | InvalidArgument> =>
  Effect.gen(function* () {
    while (true) {
      const settled = Effect.as(Deferred.await(views.found), [] as ReadonlyArray<Answer>)
      const answers: ReadonlyArray<Answer> = yield* Effect.raceFirst(views.observe, settled)
      if (views.view?.master !== undefined) return
      const unknown = answers.filter((a) => a === "unknown").length
      // "No such master" is definitive for the sentinel that says it; once most sentinels (or every
      // one that is connected) say it and none knows the master, waiting cannot help.
      const answered = answers.filter((a) => !(a instanceof LockRedisError)).length
      const offline = answers.some((a) => a instanceof LockRedisError && a.code === "OFFLINE")
      if (unknown > 0 && answered === unknown && (unknown > clients.length / 2 || !offline)) {
        return yield* new InvalidArgument({
          field: "name",
          value: name,
          reason: `the sentinels monitor no master named "${name}"`
        })
      }
      const failure = answers.find((a): a is LockRedisError => a instanceof LockRedisError)
      views.lastWhy = answered > 0 ? "no healthy master reported" : (failure?.reply ?? views.lastWhy)
      yield* Effect.sleep(100)
    }
  }).pipe(
    Effect.timeoutOrElse({
      duration: timeoutMillis,
      orElse: () =>
        Effect.fail(
          classify(
            "sentinel connect",
            new Error(`no master for ${name} found through the sentinels within ${timeoutMillis} ms (${views.lastWhy})`)
          )
        )
    })
  )

/**
 * `Route.departed` for the view's master.
 *
 * The replicas each master listed in its last `ROLE` reply, and those that left it while the
 * sentinels still vouched for them. A commanded failover promotes a replica while the old
 * master still takes writes and lists the other replicas: without this, their acknowledgement
 * would confirm a renewal the promoted replica never gets, and the key would expire there while
 * its holder runs on. A replica that died is soon `disconnected` or down for the sentinels,
 * and is forgotten then; until that, writes are refused (retried within their budget).
 * Only the current master's list is kept: after a failover the memory of an older master says
 * nothing (its replicas follow the new one), and would wrongly stop writes should it return.
 */
const departures = (
  views: Views,
  refresh: Effect.Effect<void>
): ((master: string, role: unknown) => Effect.Effect<string | undefined>) => {
  let listed: { readonly master: string; readonly replicas: ReadonlyArray<string> } | undefined
  return (master, role) =>
    Effect.suspend(() => {
      const connected = replicaAddresses(role)
      const view = views.view
      const vouched = view?.master !== undefined && Address.format(view.master) === master ? view : undefined
      const before = listed?.master === master ? listed.replicas : []
      const gone = before.filter(
        (replica) => !connected.includes(replica) && vouched?.replicaAddresses.includes(replica) === true
      )
      listed = { master, replicas: gone.length === 0 ? connected : [...connected, ...gone] }
      return gone.length === 0 ? Effect.undefined : Effect.as(refresh, gone[0])
    })
}
