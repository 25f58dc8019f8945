// The dedicated connection pool: connections that one lock operation holds for several commands
// (the write, then ROLE, then WAIT, which counts only that connection's writes and blocks it).
//
// One pool per node address, each bounded by `maxConnections`. Waiting for a free connection is
// bounded by the caller's own timeout, so a full pool delays acquisition (within waitTimeout) and
// renewal (within the usable lease) but never stretches them. A connection whose command failed,
// timed out or was interrupted is destroyed rather than reused: its socket may still carry a late
// reply or a blocked WAIT.
//
// Connections nobody used for about a minute are closed (`idleCloseMillis`): the idle ones a burst
// left in a node's pool, and the shared ones of a node no operation goes to any more (a master that
// a failover demoted, a node that left the Cluster). The check is a counter of sweeps, stamped on
// each connection when it is used, so the hot path reads no clock.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import { LockRedisError } from "@sage/lock/LockError"
import type { createClient, RedisClientOptions } from "redis"
import * as Address from "./address.ts"
import { makeClients } from "./clientClass.ts"
import { classify } from "./classify.ts"
import { type CommandClient, sendAllWithin, sendWithin } from "./commands.ts"
import { laneOf } from "./lane.ts"
import { silenceProbe } from "./silentConnection.ts"
import { destroyForGood } from "./teardown.ts"
import { monotonicMillis } from "./time.ts"

type Client = ReturnType<typeof createClient>

/** One connection, held for the duration of a `use` call. */
export interface Connection {
  /** `host:port` of the node this connection talks to. */
  readonly address: string
  /** Sends one command with its own timeout (ms). */
  readonly send: (args: ReadonlyArray<string>, timeoutMillis: number) => Effect.Effect<unknown, LockRedisError>
  /** Sends commands together (one write), each bounded by `timeoutMillis`; answers each one's outcome. */
  readonly sendAll: (
    commands: ReadonlyArray<ReadonlyArray<string>>,
    timeoutMillis: number
  ) => Effect.Effect<Array<Result.Result<unknown, LockRedisError>>>
}

export interface Pool {
  /**
   * Runs `f` on a dedicated connection to `address`, waiting at most `timeoutMillis` for one. `f` is
   * called once the connection is held, so budgets it reads when called are already net of the wait.
   */
  readonly use: <A>(
    address: string,
    timeoutMillis: number,
    f: (connection: Connection) => Effect.Effect<A, LockRedisError>
  ) => Effect.Effect<A, LockRedisError>
  /**
   * Runs `f` on one of the node's shared connections (`sharedLanes` per node, pipelined, never held
   * by one caller), `key` picking which (`laneOf`, so one lock always uses the same one). Only for
   * operations that need no command of their own around the script: no `WAIT` (it counts the writes
   * of its connection and blocks it), no `ASKING` right before. (`ROLE` may follow on it: other
   * callers' commands in between do not change which node answers.) A failure or timeout does not
   * close it (node-redis keeps replies in order); the node's shared connections are opened in the
   * background on first use, and again after one broke, and until they are ready callers use a
   * dedicated connection (`use`) instead of waiting for them.
   */
  readonly shared: <A>(
    address: string,
    key: string,
    timeoutMillis: number,
    f: (connection: Connection) => Effect.Effect<A, LockRedisError>
  ) => Effect.Effect<A, LockRedisError>
  /** Connections currently open, per address (for tests and metrics). */
  readonly openConnections: () => number
}

/**
 * A caller of `use`; `granted` is set in the same step that hands it a permit. `ready` exists only
 * while it waits for one (a caller that finds a permit free never waits).
 */
interface Ticket {
  granted: boolean
  ready: Deferred.Deferred<void> | undefined
}

/**
 * One node's permits. Waiters are served in arrival order. Ownership of a permit is recorded
 * synchronously on the ticket, so a waiter interrupted or timed out at any instant either still
 * sits in `waiters` (nothing to give back) or was granted (its finalizer gives the permit back).
 */
interface NodePool {
  free: number
  readonly waiters: Array<Ticket>
  /** Free connections, the most recently used last; each with the sweep during which it was freed. */
  readonly idle: Array<IdleClient>
}

interface IdleClient {
  readonly client: Client
  readonly freedIn: number
}

const grant = (pool: NodePool, ticket: Ticket): boolean => {
  if (pool.free === 0) return false
  pool.free--
  ticket.granted = true
  return true
}

const giveBack = (pool: NodePool): void => {
  const next = pool.waiters.shift()
  if (next === undefined) {
    pool.free++
    return
  }
  next.granted = true
  Deferred.doneUnsafe(next.ready!, Effect.void)
}

/** No connection to `address` within `timeoutMillis`: the permit never came (or, for a batch, it never went out). */
export const exhausted = (address: string, timeoutMillis: number): LockRedisError =>
  new LockRedisError({
    command: "dedicated connection",
    kind: "timeout",
    code: "POOL_EXHAUSTED",
    reply: `no dedicated connection to ${address} became free within ${Math.round(timeoutMillis)} ms`,
    retryable: true,
    mayHaveExecuted: false
  })

/**
 * A pool bounded per node. `clientOptions` are the user's node-redis options (auth, TLS, ...); the
 * socket's host and port are replaced by the node's.
 */
export const make = (options: {
  readonly maxConnections: number
  readonly clientOptions: RedisClientOptions
  /**
   * Where to connect for a node the topology names (e.g. a Cluster's `nodeAddressMap`: nodes behind
   * NAT or a proxy announce addresses the client cannot reach); undefined keeps the named address.
   */
  readonly resolve?: ((address: string) => Address.HostPort | undefined) | undefined
  /**
   * How many shared connections each node gets (default 1). One server taking every lock operation
   * (a Sentinel master) gets two, as the standalone layer has: on one connection the client and the
   * server take turns (see `lane.ts`). A Cluster client keeps one per master: there the client
   * already works on one master's replies while another runs its commands, and more connections
   * only add client CPU.
   */
  readonly sharedLanes?: number | undefined
  /**
   * Connections unused for this long (default a minute) are closed, within half as long again:
   * idle pooled ones and shared ones alike. Tests shorten it.
   */
  readonly idleCloseMillis?: number | undefined
}): Effect.Effect<Pool, never, Scope.Scope> =>
  Effect.gen(function* () {
    const nodes = new Map<string, NodePool>()
    const open = new Set<Client>()
    const clients = makeClients(options.clientOptions)
    // Idle sweeps so far: what a connection's last use is stamped with.
    let sweeps = 0
    // Once closed, no connection may be opened: a release or renewal still in flight while the layer
    // closes would otherwise open one that nothing ever closes, and the process could not exit.
    let closed = false
    const isClosed = () => closed
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        for (const client of open) destroyForGood(client)
        open.clear()
      })
    )

    const nodePool = (address: string): NodePool => {
      let pool = nodes.get(address)
      if (pool === undefined) {
        pool = { free: options.maxConnections, waiters: [], idle: [] }
        nodes.set(address, pool)
      }
      return pool
    }

    const connect = (
      address: string,
      timeoutMillis: number,
      created?: (client: Client) => void
    ): Effect.Effect<Client, LockRedisError> =>
      Effect.suspend(() => {
        if (closed) {
          return Effect.fail(
            new LockRedisError({
              command: `connect ${address}`,
              kind: "connection",
              code: "CLOSED",
              reply: "the lock backend is closed",
              retryable: false,
              mayHaveExecuted: false
            })
          )
        }
        const { host, port } = options.resolve?.(address) ?? Address.fromNodeName(address)
        const client: Client = clients({
          ...options.clientOptions,
          // A dedicated connection is never reconnected: a broken one is dropped and replaced.
          socket: { ...options.clientOptions.socket, host, port, reconnectStrategy: false },
          disableOfflineQueue: true
        } as RedisClientOptions)
        client.on("error", () => {})
        open.add(client)
        created?.(client)
        return Effect.tryPromise({
          try: () => client.connect(),
          catch: (error) => classify(`connect ${address}`, error)
        }).pipe(
          Effect.timeoutOrElse({
            duration: Math.max(1, timeoutMillis),
            orElse: () =>
              Effect.fail(
                new LockRedisError({
                  command: `connect ${address}`,
                  kind: "timeout",
                  code: "CONNECT_TIMEOUT",
                  reply: `no connection to ${address} within ${Math.round(timeoutMillis)} ms`,
                  retryable: true,
                  mayHaveExecuted: false
                })
              )
          }),
          Effect.as(client),
          // Closed while connecting: this one is not in the set the finalizer emptied.
          Effect.tap(() => (closed ? Effect.sync(() => discard(client)) : Effect.void)),
          Effect.onError(() => Effect.sync(() => discard(client)))
        )
      })

    // A pooled connection's `Connection`, made once. A command on it that got no reply in time (an
    // outcome of `sendAll`, which succeeds whatever each command did) marks it: it may still carry a
    // late reply or a blocked command, so it is closed after its use instead of going back idle.
    const pooled = new WeakMap<Client, Connection>()
    const unanswered = new WeakSet<Client>()
    const pooledConnection = (address: string, client: Client): Connection => {
      let connection = pooled.get(client)
      if (connection === undefined) {
        connection = toConnection(address, client, () => unanswered.add(client), isClosed)
        pooled.set(client, connection)
      }
      return connection
    }

    const discard = (client: Client): void => {
      open.delete(client)
      destroyForGood(client)
    }

    // Nothing here is uninterruptible: an interrupted caller leaves at once, whether it waits for a
    // permit, connects or runs `f`. One finalizer, installed before the permit is taken, settles
    // everything: the connection `f` ran on goes back to the idle list (or is destroyed, if `f` failed
    // or was interrupted: its socket may still carry a late reply or a blocked WAIT), then the permit
    // goes back (or the waiting ticket leaves the line). Written as plain continuations, with no
    // clock read or Deferred when a permit and an idle connection are free: every replicated
    // operation passes here.
    const use: Pool["use"] = (address, timeoutMillis, f) =>
      Effect.suspend(() => {
        // Looked up in the step that takes the permit: the idle sweep forgets a node whose permits are
        // all free, and the fiber may yield between two steps.
        let pool: NodePool | undefined
        const ticket: Ticket = { granted: false, ready: undefined }
        let held: Client | undefined
        const runOn = (client: Client) => {
          held = client
          return f(pooledConnection(address, client))
        }
        const withPermit = (pool: NodePool, remainingMillis: number) => {
          let client = pool.idle.pop()?.client
          while (client !== undefined && !client.isReady) {
            discard(client)
            client = pool.idle.pop()?.client
          }
          return client !== undefined ? runOn(client) : Effect.flatMap(connect(address, remainingMillis), runOn)
        }
        // Connecting shares the caller's budget with the wait for the permit.
        const waitForPermit = (pool: NodePool) =>
          Effect.flatMap(monotonicMillis, (start) => {
            const ready = Deferred.makeUnsafe<void>()
            ticket.ready = ready
            pool.waiters.push(ticket)
            return Effect.flatMap(Effect.timeoutOption(Deferred.await(ready), Math.max(1, timeoutMillis)), (granted) =>
              granted._tag === "Some"
                ? Effect.flatMap(monotonicMillis, (now) => withPermit(pool, timeoutMillis - (now - start)))
                : Effect.fail(exhausted(address, timeoutMillis))
            )
          })
        return Effect.onExit(
          Effect.suspend(() => {
            pool = nodePool(address)
            return grant(pool, ticket) ? withPermit(pool, timeoutMillis) : waitForPermit(pool)
          }),
          (exit) =>
            Effect.sync(() => {
              // Interrupted before it started: nothing taken.
              if (pool === undefined) return
              if (held !== undefined) {
                if (Exit.isSuccess(exit) && held.isReady && !closed && !unanswered.has(held)) {
                  pool.idle.push({ client: held, freedIn: sweeps })
                } else discard(held)
              }
              if (ticket.granted) return giveBack(pool)
              const at = pool.waiters.indexOf(ticket)
              if (at !== -1) pool.waiters.splice(at, 1)
            })
        )
      })

    // The shared connections of each node (`sharedLanes`), opened together in the background the
    // first time one is wanted, so no release ever waits for a connect: until a lane is ready (and
    // after it broke, until the next one is), its callers take a pooled connection, which an
    // acquisition on that node has usually left idle. A lane is marked as opening from the moment it
    // is wanted until its connect ends, so that only one is opened at a time per lane.
    const sharedLanes = Math.max(1, Math.floor(options.sharedLanes ?? 1))
    const scope = yield* Effect.scope
    const context = yield* Effect.context<never>()
    const log = (effect: Effect.Effect<void>) => Effect.runForkWith(context)(effect)
    // Each lane keeps its `Connection`: every release passes here, and needs no new one per call.
    const lanes = new Map<string, Array<Lane | undefined>>()
    const laneConnectMillis = 5_000
    const shared: Pool["shared"] = (address, key, timeoutMillis, f) =>
      Effect.suspend(() => {
        let node = lanes.get(address)
        if (node === undefined) {
          node = Array.from({ length: sharedLanes }, () => undefined)
          lanes.set(address, node)
        }
        const lane = node[laneOf(key, sharedLanes)]
        if (lane?.connection !== undefined && lane.client?.isReady === true) {
          lane.usedIn = sweeps
          return f(lane.connection)
        }
        if (lane?.opening === true || closed) return use(address, timeoutMillis, f)
        // None yet, or broken (the lock's own connections never reconnect): open every lane of the
        // node that is missing or broken, together. Each is marked as opening here, before the
        // background fiber runs, so that the callers that come meanwhile use the pool instead of
        // opening it again.
        const opening: Array<Effect.Effect<void>> = []
        for (let i = 0; i < node.length; i++) {
          const other = node[i]
          if (other !== undefined && (other.opening || other.client?.isReady === true)) continue
          if (other?.client !== undefined) discard(other.client)
          const fresh: Lane = { opening: true, client: undefined, connection: undefined, usedIn: sweeps }
          node[i] = fresh
          opening.push(
            connect(address, laneConnectMillis, (client) => {
              fresh.client = client
              // Gone silent while ready (see silentConnection.ts): destroyed, so that the next caller
              // opens the lane again, as after any break.
              const onNoReply = silenceProbe(
                () => (fresh.client === client && !closed ? client : undefined),
                (_, silentFor) => {
                  discard(client)
                  log(
                    Effect.logWarning(
                      `redis connection to ${address} answered nothing for ${silentFor} ms while reported ready; closed, a new one opens on next use`
                    )
                  )
                }
              )
              fresh.connection = toConnection(address, client, onNoReply, isClosed)
            }).pipe(
              Effect.ignore,
              Effect.ensuring(
                Effect.sync(() => {
                  fresh.opening = false
                })
              )
            )
          )
        }
        return Effect.andThen(
          // Each on its own: one that fails leaves the others connecting.
          Effect.forkIn(Effect.all(opening, { concurrency: "unbounded", discard: true }), scope),
          use(address, timeoutMillis, f)
        )
      })

    // Every half `idleCloseMillis`, close what was not used since the sweep before last: idle for a
    // whole `idleCloseMillis` at least. A shared connection unused that long has nothing in flight
    // (a stuck command would fail as the connection closes, and its caller retries); a node whose
    // permits are all back and which has nothing left open is forgotten.
    const sweepMillis = Math.max(1, (options.idleCloseMillis ?? 60_000) / 2)
    const sweep = Effect.sync(() => {
      const stale = sweeps - 2
      sweeps++
      for (const [address, pool] of nodes) {
        let kept = 0
        while (kept < pool.idle.length && pool.idle[kept]!.freedIn <= stale) kept++
        for (const { client } of pool.idle.splice(0, kept)) discard(client)
        if (pool.free === options.maxConnections && pool.waiters.length === 0 && pool.idle.length === 0) {
          nodes.delete(address)
        }
      }
      for (const [address, node] of lanes) {
        for (let i = 0; i < node.length; i++) {
          const lane = node[i]
          if (lane === undefined || lane.opening || lane.usedIn > stale) continue
          if (lane.client !== undefined) discard(lane.client)
          node[i] = undefined
        }
        if (node.every((lane) => lane === undefined)) lanes.delete(address)
      }
    })
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(sweepMillis), sweep)))

    return { use, shared, openConnections: () => open.size } satisfies Pool
  })

/** One shared connection of a node: opening (no client, or one still connecting) or opened. */
interface Lane {
  opening: boolean
  client: Client | undefined
  connection: Connection | undefined
  /** The sweep during which it was last used. */
  usedIn: number
}

/**
 * The failure of a command on a pooled connection whose socket dropped since it was handed out (a
 * failover closes them, for one). The pool's connections never reconnect, so node-redis then counts
 * the client as closed and would answer `ClientClosedError`, which means a layer closed on purpose
 * (`CLOSED`, not retryable). Retryable: the next attempt takes another connection.
 */
const dropped = (address: string, command: string): LockRedisError =>
  new LockRedisError({
    command,
    kind: "connection",
    code: "DISCONNECTED",
    reply: `the connection to ${address} was closed before the command was sent`,
    retryable: true,
    mayHaveExecuted: false
  })

/**
 * A `Connection` over a pooled client: `onNoReply` is told of a command that got no reply in time,
 * and `poolClosed` says whether a client that is no longer open was closed with the pool (`CLOSED`,
 * as it should be) rather than dropped.
 */
const toConnection = (
  address: string,
  client: Pick<Client, "isOpen" | "sendCommand">,
  onNoReply: () => void,
  poolClosed: () => boolean
): Connection => {
  const commands: CommandClient = { sendCommand: (args, options) => client.sendCommand(args, options), onNoReply }
  const usable = () => client.isOpen || poolClosed()
  return {
    address,
    send: (args, timeoutMillis) =>
      usable()
        ? sendWithin(commands, args as Array<string>, timeoutMillis)
        : Effect.fail(dropped(address, args[0] ?? "command")),
    sendAll: (batch, timeoutMillis) =>
      usable()
        ? sendAllWithin(commands, batch, timeoutMillis)
        : Effect.succeed(batch.map((args) => Result.fail(dropped(address, args[0] ?? "command"))))
  }
}
