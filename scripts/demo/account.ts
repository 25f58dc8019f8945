// The demo's "account": a balance key read and written with a plain node-redis client, separate from the
// lock's own connection, plus the "slow" mark that picks the worker to kill. Nothing here is atomic on
// purpose: the lock is what keeps GET..SET safe.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createClient } from "redis"

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

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const run = <A>(operation: string, f: () => Promise<A>): Effect.Effect<A, AccountError> =>
  Effect.tryPromise({ try: f, catch: (cause) => new AccountError({ operation, message: describe(cause) }) })

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

/** Connects a client for `keys` on `url`; it is closed with the scope (also when connecting is interrupted). */
export const connect = (url: string, keys: Keys): Effect.Effect<Account, AccountError, Scope.Scope> =>
  Effect.gen(function* () {
    const client = yield* Effect.acquireRelease(
      Effect.try({
        try: () => makeClient(url),
        catch: (cause) => new AccountError({ operation: "connect", message: `${url}: ${describe(cause)}` })
      }),
      (client) => Effect.promise(() => close(client)).pipe(Effect.timeoutOption(2_000))
    )
    yield* Effect.mapError(
      run("connect", () => client.connect()),
      (error) => new AccountError({ operation: "connect", message: `${url}: ${error.message}` })
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
