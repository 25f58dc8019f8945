// The demo's "account": a balance key read and written with a plain node-redis client, separate from the
// lock's own connection, plus the "slow" mark that picks the worker to kill. Nothing here is atomic on
// purpose: the lock is what keeps GET..SET safe. On a cluster the client is `createCluster` (every
// command names one key, so the two keys may live in different slots); on Sentinel it is
// `createSentinel`, which sends the commands to the current master.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createClient, createCluster, createSentinel } from "redis"
import { type Connection, describeConnection } from "./protocol.ts"

/** A balance command failed or the key held something that is not an integer. */
export class AccountError extends Data.TaggedError("AccountError")<{
  readonly operation: string
  readonly message: string
}> {}

export interface Keys {
  readonly balance: string
  /** Set by the parent once; the next lock holder to take it makes a slow deposit (and gets killed). */
  readonly slow: string
}

export interface Account {
  readonly get: Effect.Effect<number, AccountError>
  readonly set: (balance: number) => Effect.Effect<void, AccountError>
  readonly markSlow: Effect.Effect<void, AccountError>
  /** GETDEL of the mark: true for exactly one caller after `markSlow`. */
  readonly takeSlow: Effect.Effect<boolean, AccountError>
  readonly remove: Effect.Effect<void, AccountError>
}

type Client = ReturnType<typeof createClient>

/** The commands the account needs and the client's life cycle, whichever client carries them. */
interface Handle {
  readonly connect: () => Promise<unknown>
  readonly close: () => Promise<unknown>
  readonly get: (key: string) => Promise<unknown>
  readonly set: (key: string, value: string) => Promise<unknown>
  readonly getDel: (key: string) => Promise<unknown>
  readonly del: (keys: ReadonlyArray<string>) => Promise<unknown>
}

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const run = <A>(operation: string, f: () => Promise<A>): Effect.Effect<A, AccountError> =>
  Effect.tryPromise({ try: f, catch: (cause) => new AccountError({ operation, message: describe(cause) }) })

/** Socket options for every node: give up on a node that never answered, ride out short outages after. */
const socketOptions = (isConnected: () => boolean) => ({
  connectTimeout: 5_000,
  reconnectStrategy: (retries: number, cause: Error): number | Error =>
    !isConnected() && retries >= 3 ? cause : Math.min(50 * 2 ** retries, 500)
})

const makeClient = (url: string): Client => {
  let connected = false
  const client: Client = createClient({
    url,
    socket: {
      connectTimeout: 5_000,
      // Give up on a server that never answered (a wrong URL); once connected, ride out short outages.
      reconnectStrategy: (retries, cause) => (!connected && retries >= 3 ? cause : Math.min(50 * 2 ** retries, 500))
    }
  })
  client.on("ready", () => {
    connected = true
  })
  // Errors surface through the rejected commands; the listener keeps them from crashing the process.
  client.on("error", () => {})
  return client
}

const close = (client: Client): Promise<void> =>
  client.close().catch(() => {
    try {
      client.destroy()
    } catch {
      // already closed
    }
  })

const standalone = (url: string): Handle => {
  const client = makeClient(url)
  return {
    connect: () => client.connect(),
    close: () => close(client),
    get: (key) => client.get(key),
    set: (key, value) => client.set(key, value),
    getDel: (key) => client.getDel(key),
    del: (keys) => client.del([...keys])
  }
}

const cluster = (rootUrls: ReadonlyArray<string>): Handle => {
  let connected = false
  const client = createCluster({
    rootNodes: rootUrls.map((url) => ({ url })),
    defaults: { socket: socketOptions(() => connected) }
  })
  client.on("error", () => {})
  return {
    connect: () =>
      client.connect().then(() => {
        connected = true
      }),
    close: () =>
      client.close().catch(() => {
        try {
          client.destroy()
        } catch {
          // already closed
        }
      }),
    get: (key) => client.get(key),
    set: (key, value) => client.set(key, value),
    getDel: (key) => client.getDel(key),
    // One DEL a key: the keys may hash to different slots.
    del: (keys) => Promise.all(keys.map((key) => client.del(key)))
  }
}

const sentinel = (masterName: string, sentinels: ReadonlyArray<{ host: string; port: number }>): Handle => {
  let connected = false
  const client = createSentinel({
    name: masterName,
    sentinelRootNodes: sentinels.map(({ host, port }) => ({ host, port })),
    nodeClientOptions: { socket: socketOptions(() => connected) },
    sentinelClientOptions: { socket: socketOptions(() => connected) }
  })
  client.on("error", () => {})
  return {
    connect: () =>
      client.connect().then(() => {
        connected = true
      }),
    close: () => client.close().catch(() => client.destroy().catch(() => {})),
    get: (key) => client.get(key),
    set: (key, value) => client.set(key, value),
    getDel: (key) => client.getDel(key),
    del: (keys) => client.del([...keys])
  }
}

const makeHandle = (connection: Connection): Handle => {
  switch (connection._tag) {
    case "standalone":
      return standalone(connection.url)
    case "cluster":
      return cluster(connection.rootUrls)
    case "sentinel":
      return sentinel(connection.masterName, connection.sentinels)
  }
}

/** Connecting to a cluster or through sentinels has no single socket to give up on, so it gets a bound. */
const connectTimeoutMillis = 15_000

/** Connects a client for `keys`; it is closed with the scope (also when connecting is interrupted). */
export const connect = (connection: Connection, keys: Keys): Effect.Effect<Account, AccountError, Scope.Scope> =>
  Effect.gen(function* () {
    const where = describeConnection(connection)
    const client = yield* Effect.acquireRelease(
      Effect.try({
        try: () => makeHandle(connection),
        catch: (cause) => new AccountError({ operation: "connect", message: `${where}: ${describe(cause)}` })
      }),
      (client) => Effect.promise(() => client.close()).pipe(Effect.timeoutOption(2_000))
    )
    yield* run("connect", () => client.connect()).pipe(
      Effect.timeoutOrElse({
        duration: connectTimeoutMillis,
        orElse: () =>
          Effect.fail(new AccountError({ operation: "connect", message: `no answer in ${connectTimeoutMillis} ms` }))
      }),
      Effect.mapError((error) => new AccountError({ operation: "connect", message: `${where}: ${error.message}` }))
    )
    return {
      get: Effect.flatMap(
        run("GET", () => client.get(keys.balance)),
        (reply) => {
          const balance = Number(reply ?? "0")
          return Number.isInteger(balance)
            ? Effect.succeed(balance)
            : Effect.fail(
                new AccountError({ operation: "GET", message: `${keys.balance} holds ${JSON.stringify(reply)}` })
              )
        }
      ),
      set: (balance) => Effect.asVoid(run("SET", () => client.set(keys.balance, String(balance)))),
      markSlow: Effect.asVoid(run("SET", () => client.set(keys.slow, "1"))),
      takeSlow: Effect.map(
        run("GETDEL", () => client.getDel(keys.slow)),
        (reply) => reply !== null
      ),
      remove: Effect.asVoid(run("DEL", () => client.del([keys.balance, keys.slow])))
    }
  })
