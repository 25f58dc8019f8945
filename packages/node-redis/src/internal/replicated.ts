// Lock operations on replicated deployments (Sentinel, Cluster), shared by both topologies.
//
// Each acquire or renew runs on one dedicated connection to the key's master: the script and, in
// the same round trip, `ROLE` (the node must still call itself master, and the client's own view of
// the topology must agree: a demoted or restarted old master can answer "master" for seconds) and,
// with replica acknowledgement on, a `WAIT` for the replicas the view lists (fewer if the master
// listed fewer last time), bounded to 100 ms. When the `ROLE` reply shows that this early `WAIT`
// asked for too few replicas, or it ran out, a second `WAIT` asks for the right count with what is
// left of the caller's budget (never 0, which would block forever). `WAIT` counts only writes made
// on the same connection. A missing acknowledgement is a retryable failure; a write on a node that
// is not the master is reported as such. On Sentinel, acknowledged acquisitions that come together
// share one such round trip: their scripts, one `ROLE` and one `WAIT` (groupCommit.ts).
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { Backend, LeaseRequest, Wakeups } from "@sage/lock/LockBackend"
import type * as Scope from "effect/Scope"
import { LockRedisError } from "@sage/lock/LockError"
import { readAcquire, releasedReply, replicatedFailure as failure, runScript, type Send } from "./commands.ts"
import type { Connection, Pool } from "./pool.ts"
import { awaitReplicas, connectedReplicas, earlyWait } from "./acknowledgement.ts"
import { renewAll } from "./replicatedRenewal.ts"
import * as GroupCommit from "./groupCommit.ts"
import * as Scripts from "./scripts.ts"
import { type Subscriber, make as makeWakeups } from "./wakeups.ts"
import * as StrayWrites from "./strayWrites.ts"
import { suggestsStaleView } from "./staleView.ts"

/**
 * Where a key's master is, and how many replicas the client's view lists for it (undefined: the
 * client keeps no replica list, so the master's own list counts).
 */
export interface Route {
  readonly address: string
  readonly replicas: number | undefined
  /**
   * How many replicas the view knows for the master whatever their health (the sentinels list a
   * replica that is reattaching after a failover, or down, as well). When the master and the view
   * have no healthy replica but this is above 0, the deployment has replicas that are not back yet:
   * a write waits for them (retryable) instead of failing with `NO_REPLICAS`. Undefined: not known.
   */
  readonly knownReplicas?: number | undefined
  /**
   * Asks the view whether a replica left the master (`ROLE` lists it no more) while the view still
   * vouches for it, and answers its address. A master that lost a replica to a promotion still
   * lists the others, and their acknowledgement alone would confirm a write the promoted replica
   * never gets: such a write must not count. Only views that track each replica's health (the
   * sentinels) can tell a departure from a death; without it, the master's own list is believed.
   */
  readonly departed?: ((master: string, role: unknown) => Effect.Effect<string | undefined>) | undefined
}

/** What a replicated deployment tells the lock about its topology. */
export interface Topology {
  readonly description: string
  /** Where `key`'s master is in the client's current view (a plain look-up: no I/O). */
  readonly route: (key: string) => Result.Result<Route, LockRedisError>
  /** Whether `address` is the master for `key` in the client's current view. */
  readonly isMaster: (key: string, address: string) => boolean
  /** Asks the client to re-read the topology after a redirect, a role change or a dead node. */
  readonly refresh: (key: string) => Effect.Effect<void>
  /**
   * Re-reads the view after a `MOVED` and waits for it, at most `timeoutMillis` (Cluster only): a
   * slot that moved is then tried once more on its new master within the same call.
   */
  readonly reread?: ((key: string, timeoutMillis: number) => Effect.Effect<void>) | undefined
  /**
   * The route of the master at `address`, when the view knows it as one (Cluster: the node an `ASK`
   * names, which takes the write and whose replicas must acknowledge it). Without it, or for a node
   * the view does not know (an empty master a slot is migrating to), the master's own list counts.
   */
  readonly routeAt?: ((address: string) => Route | undefined) | undefined
  /** How releases wake waiters: `SPUBLISH` on Cluster (the message stays on the key's shard). */
  readonly publish: Scripts.Publish
  /** The subscriber for wake-ups: the topology client's own pub/sub, which follows failovers. */
  readonly subscriber: () => Promise<Subscriber>
}

/** A failure after the write was applied: the key may now hold our token, so cleanup must release it. */
const afterWrite = (error: LockRedisError): LockRedisError =>
  error.mayHaveExecuted ? error : new LockRedisError({ ...error, cause: error.cause, mayHaveExecuted: true })

const askTarget = (error: LockRedisError): string | undefined =>
  error.code === "ASK" ? error.reply.split(" ")[2] : undefined

type Outcome = "wrote" | "no-write"

/** How many replicas each master listed in its last `ROLE` reply (for the next early `WAIT`). */
type ReplicaCounts = Map<string, number>

/**
 * Keys that were busy recently. An early `WAIT` pays off only when the script writes a lease; on a
 * busy key it would hold a pooled connection until the replicas have the waiter's registration,
 * which under contention starves the renewals that share the pool. So a key that answered busy
 * within the last few seconds is acquired the two-step way: script and `ROLE`, then `WAIT` only if
 * it wrote. (A heuristic, timed with `performance.now()`: it changes cost, never the outcome.)
 */
interface BusyKeys {
  readonly note: (key: string) => void
  readonly recent: (key: string) => boolean
}

const busyMemoryMillis = 5_000
const busyMemorySize = 10_000

const busyKeys = (): BusyKeys => {
  const until = new Map<string, number>()
  return {
    note: (key) => {
      if (until.size >= busyMemorySize) until.clear()
      until.set(key, performance.now() + busyMemoryMillis)
    },
    recent: (key) => {
      const end = until.get(key)
      if (end === undefined) return false
      if (end > performance.now()) return true
      until.delete(key)
      return false
    }
  }
}

/** What a backend keeps across operations. */
interface Known {
  readonly replicaCounts: ReplicaCounts
  readonly busy: BusyKeys
  /** Batches acknowledged acquisitions per node (absent: each goes on its own). */
  readonly groups?: GroupCommit.GroupCommit | undefined
}

const noRole: Result.Result<unknown, LockRedisError> = Result.fail(undefined as unknown as LockRedisError)

/**
 * Runs one script on the key's master and, when it wrote, checks the role and waits for replicas.
 * `interpret` says what the reply means, and whether the key now holds our token with a fresh lease
 * (`wrote`).
 *
 * Every replicated operation runs through here, so the usual case (a free pooled connection, one
 * round trip, the role and the replicas as expected) takes a handful of Effect steps: the budget is
 * read from the fiber's clock directly, replies are interpreted as plain values, and an Effect is
 * built only where the outcome needs one (a second `WAIT`, a `ROLE` asked again, a failure).
 */
const guardedWrite = <A>(
  topology: Topology,
  pool: Pool,
  known: Known,
  request: LeaseRequest,
  script: Scripts.Script,
  [keys, args]: readonly [ReadonlyArray<string>, ReadonlyArray<string>],
  interpret: (reply: unknown) => Result.Result<readonly [A, Outcome], LockRedisError>,
  onNotMaster: (address: string) => Effect.Effect<A, LockRedisError>
): Effect.Effect<A, LockRedisError> =>
  Effect.withFiber((fiber) => {
    const clock = fiber.getRef(Clock.Clock)
    const now = () => Number(clock.monotonicTimeNanosUnsafe() / 1_000_000n)
    const start = now()
    // Finish a little before the caller's own cut-off, so a pool wait or a WAIT that runs out ends
    // with its own explanation (POOL_EXHAUSTED, UNACKNOWLEDGED) rather than a bare timeout.
    const budget = request.timeoutMillis - Math.max(10, request.timeoutMillis * 0.2)
    const left = () => budget - (now() - start)
    // Acquire and renew can write a lease that needs the role check, and a check's "held" is only
    // worth something from the master; release and leave need none.
    const writesLease = script === Scripts.acquire || script === Scripts.renew || script === Scripts.check
    // Everything after an applied write: the role, the client's view, the replicas. A failure here
    // comes after the write was applied, so it says so (`afterWrite`).
    const checkWrite = (
      route: Route,
      connection: { readonly address: string; readonly send: Send },
      value: A,
      asking: boolean,
      roleAfterWrite: unknown,
      earlyAcks: unknown
    ): Effect.Effect<A, LockRedisError> => {
      const withRole = (role: unknown): Effect.Effect<A, LockRedisError> => {
        known.replicaCounts.set(connection.address, connectedReplicas(role))
        const isMaster = Array.isArray(role) && role[0] === "master"
        if (!isMaster || (!asking && !topology.isMaster(request.key, connection.address))) {
          return Effect.mapError(onNotMaster(connection.address), afterWrite)
        }
        if (!request.acknowledge) return Effect.succeed(value)
        return Effect.mapError(Effect.as(awaitReplicas(connection, route, role, left(), earlyAcks), value), afterWrite)
      }
      return roleAfterWrite !== undefined
        ? withRole(roleAfterWrite)
        : Effect.flatMap(Effect.mapError(connection.send(["ROLE"], left()), afterWrite), withRole)
    }
    // An ASK redirect takes a second connection within what is left, not a fresh budget.
    // Only `WAIT` (it counts the writes of its connection and blocks it) and `ASKING` (it must come
    // right before the script) need a connection of their own. Everything else runs on one of the
    // node's shared, pipelined connections (the key picks which), `ROLE` included: whatever other
    // callers send in between, it answers for the node that ran the script, after the script ran.
    const dedicated = writesLease && request.acknowledge
    const onNode = (
      address: string,
      asking: boolean,
      f: (connection: Connection) => Effect.Effect<A, LockRedisError>
    ): Effect.Effect<A, LockRedisError> =>
      dedicated || asking ? pool.use(address, left(), f) : pool.shared(address, request.key, left(), f)
    // The script's outcome, on the connection it ran on: when it wrote, the role and the replicas
    // are checked there (a second `WAIT` must follow the write on its own connection).
    const afterScript = (
      route: Route,
      connection: Connection,
      asking: boolean,
      result: Result.Result<unknown, LockRedisError>,
      role: Result.Result<unknown, LockRedisError>,
      acks: Result.Result<unknown, LockRedisError>
    ): Effect.Effect<A, LockRedisError> => {
      if (Result.isFailure(result)) {
        // Re-sent (NOSCRIPT): the role and acknowledgement that went with it ran too early. After an
        // ASK redirect the re-sent script needs `ASKING` right before it again (the flag lasts one
        // command), or the importing node answers MOVED back to the source.
        if (result.failure.code !== "NOSCRIPT") return Effect.fail(result.failure)
        const evalArgs = Scripts.evalArgs("EVAL", script, keys, args)
        const resent = asking
          ? Effect.flatMap(
              Effect.suspend(() => connection.sendAll([["ASKING"], evalArgs], left())),
              ([asked, evaluated]) =>
                Result.isFailure(asked!) ? Effect.fail(asked.failure) : Effect.fromResult(evaluated!)
            )
          : Effect.suspend(() => connection.send(evalArgs, left()))
        return Effect.flatMap(resent, (reply) => afterReply(route, connection, asking, reply, undefined, undefined))
      }
      return afterReply(
        route,
        connection,
        asking,
        result.success,
        Result.isFailure(role) ? undefined : role.success,
        Result.isFailure(acks) ? undefined : acks.success
      )
    }
    const afterReply = (
      route: Route,
      connection: Connection,
      asking: boolean,
      reply: unknown,
      role: unknown,
      acks: unknown
    ): Effect.Effect<A, LockRedisError> => {
      const interpreted = interpret(reply)
      if (Result.isFailure(interpreted)) return Effect.fail(interpreted.failure)
      const [value, outcome] = interpreted.success
      if (outcome === "no-write") {
        if (script === Scripts.acquire) known.busy.note(request.key)
        return Effect.succeed(value)
      }
      return checkWrite(route, connection, value, asking, role ?? undefined, acks ?? undefined)
    }
    const earlyWaitFor = (route: Route, address: string, timeout: number) =>
      script === Scripts.acquire && request.acknowledge && !known.busy.recent(request.key)
        ? earlyWait(route, known.replicaCounts.get(address), timeout)
        : undefined
    const attempt = (route: Route, address: string, asking: boolean): Effect.Effect<A, LockRedisError> => {
      // An acknowledged acquisition joins the node's next batch (groupCommit.ts): its script, one
      // ROLE and one WAIT for the whole batch, in one write on one dedicated connection.
      if (dedicated && !asking && script === Scripts.acquire && known.groups !== undefined) {
        const timeout = left()
        return known.groups.run(
          address,
          timeout,
          Scripts.evalArgs("EVALSHA", script, keys, args),
          earlyWaitFor(route, address, timeout),
          (outcome, connection) => afterScript(route, connection, false, outcome.script, outcome.role, outcome.acks)
        )
      }
      return onNode(address, asking, (connection) => {
        // The script, ROLE and (with acknowledgement) WAIT go out together, one round trip: on one
        // connection they run in order, so ROLE answers for the node that just ran the script and
        // WAIT waits for its write.
        const sendAll = () => {
          const timeout = left()
          const wait = earlyWaitFor(route, address, timeout)
          const commands: Array<ReadonlyArray<string>> = [Scripts.evalArgs("EVALSHA", script, keys, args)]
          if (writesLease) commands.push(["ROLE"])
          if (wait !== undefined) commands.push(wait)
          return Effect.flatMap(connection.sendAll(commands, timeout), (outcomes) =>
            afterScript(
              route,
              connection,
              asking,
              outcomes[0]!,
              writesLease ? outcomes[1]! : noRole,
              wait === undefined ? noRole : outcomes[writesLease ? 2 : 1]!
            )
          )
        }
        return asking
          ? Effect.flatMap(
              Effect.suspend(() => connection.send(["ASKING"], left())),
              sendAll
            )
          : sendAll()
      })
    }
    const refreshOn = (error: LockRedisError): Effect.Effect<never, LockRedisError> =>
      suggestsStaleView(error) ? Effect.andThen(topology.refresh(request.key), Effect.fail(error)) : Effect.fail(error)
    const routed = topology.route(request.key)
    if (Result.isFailure(routed)) return Effect.fail(routed.failure)
    const route = routed.success
    // A MOVED reply means the script did not run: once the view has caught up, the new master is
    // asked within what is left, rather than a retry round later. The re-read gets half of that, so
    // a slow one still leaves time for the call (or for the caller's retry).
    const followMoved = (error: LockRedisError): Effect.Effect<A, LockRedisError> => {
      if (error.code !== "MOVED" || topology.reread === undefined) return refreshOn(error)
      return Effect.flatMap(topology.reread(request.key, left() / 2), () => {
        const moved = topology.route(request.key)
        if (Result.isFailure(moved) || moved.success.address === route.address) return refreshOn(error)
        return Effect.catch(attempt(moved.success, moved.success.address, false), refreshOn)
      })
    }
    return Effect.catch(attempt(route, route.address, false), (error) => {
      const target = askTarget(error)
      if (target === undefined) return followMoved(error)
      // The script runs on the node the slot is migrating to: its replicas acknowledge the write.
      const asked: Route = topology.routeAt?.(target) ?? { address: target, replicas: undefined }
      return Effect.catch(attempt(asked, target, true), refreshOn)
    })
  })

/**
 * Compare-and-delete on nodes outside the current view, best effort within `timeoutMillis` in all.
 * Each step has its own bound (the pool's connect, the script, a NOSCRIPT re-send), and a restarted
 * node can use most of each, so the whole is bounded once more: one after the other they could take
 * three times the budget, and the caller's cleanup promises one second.
 */
const releaseStrays = (
  topology: Topology,
  pool: Pool,
  addresses: ReadonlyArray<string>,
  request: LeaseRequest
): Effect.Effect<void> =>
  Effect.forEach(
    addresses,
    (address) =>
      pool.use(address, request.timeoutMillis, (connection) =>
        runScript(
          connection.send,
          Scripts.release,
          ...Scripts.releaseCall(request, topology.publish),
          request.timeoutMillis
        )
      ),
    { concurrency: "unbounded", discard: true }
  ).pipe(Effect.timeoutOption(Math.max(1, request.timeoutMillis)), Effect.ignore)

/**
 * The lock backend over a replicated topology and its dedicated pool, with wake-ups over the
 * topology's subscriber. `strays` records writes that landed outside the view, for the release that
 * follows (see strayWrites.ts).
 */
export const makeBackend = (
  topology: Topology,
  pool: Pool,
  strays = StrayWrites.make(),
  options: {
    readonly sharedSubscriber?: boolean | undefined
    /** Commit acknowledged acquisitions to a master as groups (groupCommit.ts). */
    readonly groupCommit?: boolean | undefined
  } = {}
): Effect.Effect<Backend, never, Scope.Scope> => {
  const grouping: Effect.Effect<GroupCommit.GroupCommit | undefined, never, Scope.Scope> =
    options.groupCommit === true ? GroupCommit.make(pool) : Effect.succeed(undefined)
  return Effect.flatMap(grouping, (groups) => {
    const known: Known = { replicaCounts: new Map<string, number>(), busy: busyKeys(), groups }
    return Effect.map(
      makeWakeups({
        subscriber: topology.subscriber,
        // On a client the application keeps, the lock's channels are dropped when its layer closes.
        unsubscribeOnClose: options.sharedSubscriber,
        leave: (key, waiterId, timeoutMillis) =>
          Effect.ignore(
            guardedWrite(
              topology,
              pool,
              known,
              { key, token: "", leaseMillis: 0, timeoutMillis, acknowledge: false },
              Scripts.leave,
              Scripts.leaveCall(key, waiterId, topology.publish),
              () => Result.succeed([undefined, "no-write"] as const),
              () => Effect.void
            )
          )
      }),
      (wakeups) => backendOver(topology, pool, known, strays, wakeups)
    )
  })
}

const backendOver = (
  topology: Topology,
  pool: Pool,
  known: Known,
  strays: StrayWrites.StrayWrites,
  wakeups: Wakeups
): Backend => {
  const backend: Backend = {
    description: topology.description,
    acquire: (request) =>
      guardedWrite(
        topology,
        pool,
        known,
        request,
        Scripts.acquire,
        Scripts.acquireCall(request, topology.publish),
        (reply) =>
          Result.map(
            readAcquire(reply),
            (parsed) => [parsed, parsed._tag === "Acquired" ? "wrote" : "no-write"] as const
          ),
        (address) =>
          Effect.sync(() => {
            strays.remember(request.key, request.token, address)
            return { _tag: "NotMaster", address } as const
          })
      ),
    renew: (request) =>
      guardedWrite(
        topology,
        pool,
        known,
        request,
        Scripts.renew,
        Scripts.renewCall(request),
        (reply) => Result.succeed([reply === 1, reply === 1 ? "wrote" : "no-write"] as const),
        (address) =>
          Effect.suspend(() => {
            strays.remember(request.key, request.token, address)
            return Effect.fail(failure("NOT_MASTER", `${address} is not the master for ${request.key}`, true))
          })
      ),
    release: (request) =>
      Effect.suspend(() => {
        const onMaster = guardedWrite(
          topology,
          pool,
          known,
          { ...request, acknowledge: false },
          Scripts.release,
          Scripts.releaseCall(request, topology.publish),
          (reply) => Result.succeed([releasedReply(reply), "no-write"] as const),
          () => Effect.succeed(false)
        )
        // A node that took this token's write outside the view is cleaned too; only the master's reply counts.
        const elsewhere = strays.take(request.key, request.token)
        if (elsewhere.length === 0) return onMaster
        return Effect.all([Effect.result(onMaster), releaseStrays(topology, pool, elsewhere, request)], {
          concurrency: "unbounded"
        }).pipe(Effect.flatMap(([result]) => Effect.fromResult(result)))
      }),
    // "Held" counts as a write here only so that the role and the client's view are checked (with no
    // WAIT): a demoted master may still hold the key while the new one has lost it.
    check: (request) =>
      guardedWrite(
        topology,
        pool,
        known,
        { ...request, acknowledge: false },
        Scripts.check,
        Scripts.checkCall(request),
        (reply) => {
          const held = typeof reply === "number" && reply !== -2
          return Result.succeed([held, held ? "wrote" : "no-write"] as const)
        },
        (address) => Effect.fail(failure("NOT_MASTER", `${address} is not the master for ${request.key}`, false))
      ),
    renewAll: (requests) => renewAll(topology, pool, requests, (request) => backend.renew(request), strays),
    wakeups
  }
  return backend
}
