// The Sentinel topology: which node is the master, and how many healthy replicas it has, as the
// sentinels report it. Lock operations go to that master on dedicated connections; this module only
// keeps the view.
//
// It asks the sentinels itself instead of running node-redis's Sentinel client, whose connect waits
// for every sentinel and replica connection in turn with no bound of its own: one stalled (SIGSTOP)
// sentinel or replica held the layer, the calls waiting on it and the shutdown until it resumed.
// Here every sentinel has its own small client, every question carries its own timeout and is
// asked of all sentinels at once, data nodes are never connected to (replicas are only counted), and
// closing destroys the clients without waiting for anyone. The view is refreshed every second and
// at once when an operation meets a stale one; sentinels the others report are asked too.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import type { createClient, RedisClientOptions } from "redis"
import * as Address from "./address.ts"
import { replicaAddresses } from "./acknowledgement.ts"
import { classify, isUnknownMasterReply } from "./classify.ts"
import { makeClients } from "./clientClass.ts"
import { sendWithin } from "./commands.ts"
import type { Topology } from "./replicated.ts"
import type { Subscriber } from "./wakeups.ts"
import { defaultReconnect } from "./standalone.ts"
import { destroyForGood } from "./teardown.ts"

type Client = ReturnType<typeof createClient>

/** The master and its healthy replicas, as the best-informed sentinel reports them. */
interface View {
  readonly master: Address.HostPort | undefined
  readonly replicas: number
  /** Every replica the sentinel lists for the master, healthy or not (see `Route.knownReplicas`). */
  readonly knownReplicas: number
  /** The healthy replicas' addresses (`ip:port`, as the master lists them in `ROLE`). */
  readonly replicaAddresses: ReadonlyArray<string>
  readonly epoch: number
  /** The other sentinels this one knows, so the client also asks sentinels it was not given. */
  readonly sentinels: ReadonlyArray<Address.HostPort>
}

/** One sentinel's answer: its view, "unknown" (it monitors no master of that name), or no answer. */
type Answer = View | "unknown" | LockRedisError

const askTimeoutMillis = 1_000
const refreshEveryMillis = 1_000
/** Discovery never grows the set of sentinel clients past this. */
const maxSentinels = 16

/** A field map as a record: RESP2 `[k1, v1, k2, v2, ...]`, or RESP3's map (an object or a `Map`). */
const pairs = (reply: unknown): Record<string, string> => {
  const fields: Record<string, string> = {}
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1])
  } else if (reply instanceof Map) {
    for (const [key, value] of reply) fields[String(key)] = String(value)
  } else if (typeof reply === "object" && reply !== null) {
    for (const [key, value] of Object.entries(reply)) fields[key] = String(value)
  }
  return fields
}

/** A node a sentinel can vouch for: not subjectively down, connected, not mid-failover. */
const healthy = (fields: Record<string, string>): boolean => {
  const flags = (fields["flags"] ?? "").split(",")
  return !flags.some((flag) => flag === "s_down" || flag === "o_down" || flag === "disconnected")
}

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
  readonly sentinelClientOptions?: RedisClientOptions | undefined
  /** Options for the wake-up subscriber's connection to the master (auth, TLS). */
  readonly nodeClientOptions?: RedisClientOptions | undefined
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
    const makeClient = makeClients()
    const clients = yield* Effect.acquireRelease(
      Effect.sync(() =>
        options.sentinels.map((node) => sentinelClient(makeClient, node, options.sentinelClientOptions))
      ),
      (clients) => Effect.sync(() => clients.forEach(destroyForGood))
    )
    const known = new Set(options.sentinels.map(Address.format))
    const discover = (nodes: ReadonlyArray<Address.HostPort>): void => {
      for (const node of nodes) {
        if (known.has(Address.format(node)) || clients.length >= maxSentinels) continue
        known.add(Address.format(node))
        clients.push(sentinelClient(makeClient, node, options.sentinelClientOptions))
      }
    }

    let view: View | undefined
    const found = Deferred.makeUnsafe<void>()
    // Each answer counts as soon as it arrives: a sentinel that stalls mid-question delays no one.
    // A newer epoch (a finished failover) always wins; an older one (a sentinel that missed it)
    // never does; at the same epoch, an answer naming a master replaces one that names none.
    const adopt = (answer: Answer): void => {
      if (answer === "unknown" || answer instanceof LockRedisError) return
      if (
        view === undefined ||
        answer.epoch > view.epoch ||
        (answer.epoch === view.epoch && answer.master !== undefined)
      ) {
        view = answer
      }
      discover(answer.sentinels)
      if (view.master !== undefined) Deferred.doneUnsafe(found, Effect.void)
    }
    const observe: Effect.Effect<ReadonlyArray<Answer>> = Effect.suspend(() =>
      Effect.forEach(
        [...clients],
        (client) => Effect.tap(ask(client, name), (answer) => Effect.sync(() => adopt(answer))),
        { concurrency: "unbounded" }
      )
    )

    let lastWhy = "no sentinel answered"
    const first = Effect.gen(function* () {
      while (true) {
        const settled = Effect.as(Deferred.await(found), [] as ReadonlyArray<Answer>)
        const answers: ReadonlyArray<Answer> = yield* Effect.raceFirst(observe, settled)
        if (view?.master !== undefined) return
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
        lastWhy = answered > 0 ? "no healthy master reported" : (failure?.reply ?? lastWhy)
        yield* Effect.sleep(100)
      }
    })
    yield* first.pipe(
      Effect.timeoutOrElse({
        duration: timeoutMillis,
        orElse: () =>
          Effect.fail(
            classify(
              "sentinel connect",
              new Error(`no master for ${name} found through the sentinels within ${timeoutMillis} ms (${lastWhy})`)
            )
          )
      })
    )

    // Kept current in the background; `refresh` asks at once (one question in flight at a time).
    let refreshing = false
    const refreshNow = Effect.suspend(() => {
      if (refreshing) return Effect.void
      refreshing = true
      return observe.pipe(Effect.ensuring(Effect.sync(() => (refreshing = false))))
    })
    const scope = yield* Effect.scope
    const wakeups = yield* masterSubscriber(() => view?.master, options.nodeClientOptions)
    yield* Effect.forkScoped(
      Effect.forever(Effect.sleep(refreshEveryMillis).pipe(Effect.andThen(refreshNow), Effect.andThen(wakeups.follow)))
    )

    const refresh = Effect.asVoid(Effect.forkIn(refreshNow.pipe(Effect.andThen(wakeups.follow)), scope))

    // The replicas each master listed in its last `ROLE` reply, and those that left it while the
    // sentinels still vouched for them. A commanded failover promotes a replica while the old
    // master still takes writes and lists the other replicas: without this, their acknowledgement
    // would confirm a renewal the promoted replica never gets, and the key would expire there while
    // its holder runs on. A replica that died is soon `disconnected` or down for the sentinels,
    // and is forgotten then; until that, writes are refused (retried within their budget).
    // Only the current master's list is kept: after a failover the memory of an older master says
    // nothing (its replicas follow the new one), and would wrongly stop writes should it return.
    let listed: { readonly master: string; readonly replicas: ReadonlyArray<string> } | undefined
    const departed = (master: string, role: unknown): Effect.Effect<string | undefined> =>
      Effect.suspend(() => {
        const connected = replicaAddresses(role)
        const vouched = view?.master !== undefined && Address.format(view.master) === master ? view : undefined
        const before = listed?.master === master ? listed.replicas : []
        const gone = before.filter(
          (replica) => !connected.includes(replica) && vouched?.replicaAddresses.includes(replica) === true
        )
        listed = { master, replicas: gone.length === 0 ? connected : [...connected, ...gone] }
        return gone.length === 0 ? Effect.undefined : Effect.as(refresh, gone[0])
      })

    return {
      description: "node-redis sentinel",
      route: () =>
        view?.master === undefined
          ? Result.fail(noMaster(name, lastWhy))
          : Result.succeed({
              address: Address.format(view.master),
              replicas: view.replicas,
              knownReplicas: view.knownReplicas,
              departed
            }),
      isMaster: (_key, address) => view?.master !== undefined && Address.format(view.master) === address,
      refresh: () => refresh,
      publish: "PUBLISH",
      subscriber: () => Promise.resolve(wakeups.subscriber)
    } satisfies Topology
  })

/**
 * The wake-up subscriber: one connection to the current master, subscribed to the channels in use.
 * When the view's master changes (`follow`), it is replaced by a connection to the new master and
 * every channel is subscribed again; a message published meanwhile is lost, which costs a waiter
 * only its safety-net poll. A connection that went silent (`discard`) is dropped the same way: the
 * next `subscribe` opens another to the master of the view.
 */
export const masterSubscriber = (
  master: () => Address.HostPort | undefined,
  options: RedisClientOptions | undefined
): Effect.Effect<{ readonly subscriber: Subscriber; readonly follow: Effect.Effect<void> }, never, Scope.Scope> =>
  Effect.gen(function* () {
    const listeners = new Map<string, (message: string) => void>()
    // Built now: the first connection is opened when a waiter first subscribes, during its acquisition.
    const makeClient = makeClients(options ?? {})
    // `raw` is kept beside the promise so that a connection is closed whatever state it is in: one
    // still connecting (its promise may not settle while the node is down) or one whose subscribe
    // failed would otherwise stay open, reconnecting, after the layer closed.
    let current: { readonly address: string; readonly raw: Client; readonly client: Promise<Client> } | undefined
    let closed = false
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        if (current !== undefined) destroyForGood(current.raw)
        current = undefined
      })
    )
    const connectTo = (node: Address.HostPort): { readonly raw: Client; readonly ready: Promise<Client> } => {
      const client = makeClient({
        ...options,
        socket: { reconnectStrategy: defaultReconnect, ...options?.socket, host: node.host, port: node.port }
      } as RedisClientOptions)
      client.on("error", () => {})
      const ready = client.connect().then(async () => {
        for (const [channel, listener] of listeners) await client.subscribe(channel, listener)
        return client
      })
      ready.catch(() => destroyForGood(client))
      return { raw: client, ready }
    }
    /** The connection to the master in the current view, replacing one to an older master. */
    const toMaster = (): Promise<Client> => {
      const node = master()
      if (closed) return Promise.reject(new Error("the lock backend is closed"))
      if (node === undefined) return Promise.reject(new Error("no master known"))
      const address = Address.format(node)
      if (current?.address === address) return current.client
      const previous = current
      const next = connectTo(node)
      const entry = { address, raw: next.raw, client: next.ready }
      current = entry
      next.ready.catch(() => {
        if (current === entry) current = undefined
      })
      if (previous !== undefined) destroyForGood(previous.raw)
      return entry.client
    }
    const subscriber: Subscriber = {
      subscribe: (channel, listener) => {
        listeners.set(channel, listener)
        return toMaster().then((client) => client.subscribe(channel, listener))
      },
      unsubscribe: (channel) => {
        listeners.delete(channel)
        return current?.client.then((client) => client.unsubscribe(channel)) ?? Promise.resolve()
      },
      probed: () => current?.raw,
      discard: (silent) => {
        if (current === undefined || current.raw !== silent) return false
        destroyForGood(current.raw)
        current = undefined
        return true
      }
    }
    const follow = Effect.sync(() => {
      const node = master()
      if (current === undefined || listeners.size === 0 || node === undefined) return
      if (current.address !== Address.format(node)) void toMaster().catch(() => undefined)
    })
    return { subscriber, follow }
  })

const sentinelClient = (
  makeClient: (options: RedisClientOptions) => Client,
  node: Address.HostPort,
  options: RedisClientOptions | undefined
): Client => {
  const client = makeClient({
    ...options,
    socket: { reconnectStrategy: defaultReconnect, ...options?.socket, host: node.host, port: node.port },
    // A question to a sentinel that is not connected fails at once; another sentinel answers it.
    disableOfflineQueue: true
  } as RedisClientOptions)
  client.on("error", () => {})
  // Never awaited: a stalled sentinel may hold its handshake forever, and nothing waits for it.
  client.connect().catch(() => {})
  return client
}

// One question, bounded by its own timer (`sendWithin`), with neither node-redis's `timeout` nor an
// abort signal: on node-redis 5 a command given both can be unlinked from the queue twice (the
// timeout after an abort), which throws from a timer callback, an uncaught exception, before 5.9,
// and corrupts the queue's length after. A question abandoned by an interruption is answered and
// ignored.
const send = (client: Client, args: ReadonlyArray<string>): Effect.Effect<unknown, LockRedisError> =>
  sendWithin(client, [...args], askTimeoutMillis).pipe(
    Effect.mapError((error) => new LockRedisError({ ...error, command: args.slice(0, 2).join(" ") }))
  )

/** One sentinel's view of the master `name` and its healthy replicas. */
const ask = (client: Client, name: string): Effect.Effect<Answer> =>
  Effect.gen(function* () {
    const master = pairs(yield* send(client, ["SENTINEL", "MASTER", name]))
    const port = Number(master["port"])
    const epoch = Number(master["config-epoch"] ?? 0)
    const address = { host: master["ip"] ?? "", port }
    const usable = healthy(master) && !(master["flags"] ?? "").includes("failover_in_progress")
    const replies = yield* send(client, ["SENTINEL", "REPLICAS", name])
    const listed = Array.isArray(replies) ? replies.map(pairs) : []
    const replicaAddresses = listed.filter(healthy).map((fields) => `${fields["ip"] ?? ""}:${fields["port"] ?? ""}`)
    const replicas = replicaAddresses.length
    const valid = usable && Address.checkHost(address.host) === undefined && Address.checkPort(port) === undefined
    const others = yield* send(client, ["SENTINEL", "SENTINELS", name]).pipe(Effect.orElseSucceed(() => []))
    return {
      master: valid ? address : undefined,
      replicas,
      knownReplicas: listed.length,
      replicaAddresses,
      epoch,
      sentinels: nodesOf(others)
    } satisfies View
  }).pipe(
    Effect.catch((error: LockRedisError) =>
      Effect.succeed<Answer>(error.kind === "server" && isUnknownMasterReply(error.reply) ? "unknown" : error)
    )
  )

/** The healthy, well-formed addresses in a `SENTINEL SENTINELS` or `SENTINEL REPLICAS` reply. */
const nodesOf = (reply: unknown): Array<Address.HostPort> =>
  (Array.isArray(reply) ? reply.map(pairs) : []).filter(healthy).flatMap((fields) => {
    const node = { host: fields["ip"] ?? "", port: Number(fields["port"]) }
    return Address.checkHost(node.host) === undefined && Address.checkPort(node.port) === undefined ? [node] : []
  })
