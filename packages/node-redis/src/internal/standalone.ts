// The standalone backend: one node-redis client whose shared, pipelined connection carries every
// lock operation (each is a single script, so none needs a dedicated connection). The client lives
// as long as the layer, reconnects with a short capped backoff, and never throws socket errors.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend, LeaseRequest, RenewReply } from "@sage/lock/LockBackend"
import type { LockRedisError } from "@sage/lock/LockError"
import { createClient, type RedisClientOptions } from "redis"
import { classify } from "./classify.ts"
import {
  type CommandClient,
  parseAcquire,
  parseTransfer,
  runScript,
  type Send,
  sendWithin,
  unexpected
} from "./commands.ts"
import * as Scripts from "./scripts.ts"
import * as Wakeups from "./wakeups.ts"
import type { Subscriber } from "./wakeups.ts"

type Client = ReturnType<typeof createClient>

/** What the lock needs of a client's duplicate, which it owns and uses as the wake-up subscriber. */
export interface SubscriberClient {
  on(event: "error", listener: (error: unknown) => void): unknown
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
  close(): Promise<unknown>
  destroy(): void
  readonly isOpen: boolean
}

/** What the lock needs of a connected client it shares: commands, and a duplicate to subscribe with. */
export interface SharedClient extends CommandClient {
  duplicate(): SubscriberClient
}

/** 20 ms doubling up to 500 ms, plus up to 50 ms of jitter: a lock cannot wait seconds to reconnect. */
export const defaultReconnect = (retries: number): number =>
  Math.min(20 * 2 ** retries, 500) + Math.floor(Math.random() * 50)

export const connect = (
  clientOptions: RedisClientOptions,
  connectTimeoutMillis: number
): Effect.Effect<Client, LockRedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context()
    const log = (effect: Effect.Effect<void>) => Effect.runForkWith(context)(effect)
    const client: Client = createClient({
      ...clientOptions,
      socket: { reconnectStrategy: defaultReconnect, ...clientOptions.socket }
    } as RedisClientOptions) as Client
    // Until the first `ready`, a connection error fails the layer; afterwards errors are logged once
    // per outage (node-redis reports every failed reconnect attempt).
    let ready = false
    let reported = false
    let failFirst: ((error: unknown) => void) | undefined
    client.on("error", (error: unknown) => {
      if (!ready) return failFirst?.(error)
      if (reported) return
      reported = true
      log(Effect.logWarning("redis connection error; reconnecting", classify("connect", error)))
    })
    client.on("ready", () => {
      ready = true
      reported = false
    })
    const timeout = connectTimeoutMillis
    return yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          new Promise<Client>((resolve, reject) => {
            failFirst = reject
            const timer = setTimeout(() => reject(new Error(`could not connect within ${timeout} ms`)), timeout)
            client.connect().then(
              () => {
                clearTimeout(timer)
                resolve(client)
              },
              (error: unknown) => {
                clearTimeout(timer)
                reject(error)
              }
            )
          }),
        catch: (error) => {
          client.destroy()
          return classify("connect", error)
        }
      }),
      (client) =>
        Effect.promise(() => client.close()).pipe(
          Effect.timeoutOption(2_000),
          Effect.ensuring(Effect.sync(() => client.isOpen && client.destroy())),
          Effect.ignore
        )
    )
  })

/** At most this many leases go into one `renewAll` script: a long script blocks the server. */
export const renewChunk = 500

/**
 * The backend over a connected standalone client: every operation is one script on the shared
 * connection; wake-ups use one more connection, a subscriber opened the first time a lock is waited
 * for, and closed with the scope.
 */
export const fromClient = (client: SharedClient, description: string): Effect.Effect<Backend, never, Scope.Scope> =>
  Effect.gen(function* () {
    return yield* backendOver({
      description,
      send: (args, timeoutMillis) => sendWithin(client, args as Array<string>, timeoutMillis),
      subscriber: yield* duplicateSubscriber(client),
      // One node-redis client: its commands go out on one connection, in the order they are sent.
      ordered: true
    })
  })

/**
 * Wake-ups on one duplicate of `client`, the lock's own: connected on first use, every channel on
 * it, closed with the scope.
 */
export const duplicateSubscriber = (
  client: Pick<SharedClient, "duplicate">
): Effect.Effect<() => Promise<Subscriber>, never, Scope.Scope> =>
  Effect.gen(function* () {
    let subscriber: SubscriberClient | undefined
    yield* Effect.addFinalizer(() =>
      subscriber === undefined
        ? Effect.void
        : Effect.promise(() => subscriber!.close()).pipe(
            Effect.timeoutOption(1_000),
            Effect.ensuring(Effect.sync(() => subscriber?.isOpen && subscriber.destroy())),
            Effect.ignore
          )
    )
    return async () => {
      const duplicate = client.duplicate()
      duplicate.on("error", () => {})
      subscriber = duplicate
      await duplicate.connect()
      return {
        subscribe: (channel, listener) => duplicate.subscribe(channel, listener),
        unsubscribe: (channel) => duplicate.unsubscribe(channel)
      }
    }
  })

/**
 * The standalone backend over any way of sending one command (a node-redis client, Effect's `Redis`
 * service): each operation is one script. Without `subscriber` there are no wake-ups, and waiters
 * poll with backoff.
 */
export const backendOver = (options: {
  readonly description: string
  readonly send: Send
  readonly subscriber?: (() => Promise<Subscriber>) | undefined
  /** Whether `send` delivers commands in the order it is called (see `Backend.ordered`). */
  readonly ordered?: boolean | undefined
}): Effect.Effect<Backend, never, Scope.Scope> => {
  const { send } = options
  const renewChunkOf = (requests: ReadonlyArray<LeaseRequest>): Effect.Effect<ReadonlyArray<RenewReply>> => {
    const first = requests[0]!
    const keys = requests.map((request) => request.key)
    const tokens = requests.map((request) => request.token)
    return send(Scripts.renewAllArgs("EVALSHA", keys, tokens, first.leaseMillis), first.timeoutMillis).pipe(
      Effect.catchIf(
        (error) => error.code === "NOSCRIPT",
        () => send(Scripts.renewAllArgs("EVAL", keys, tokens, first.leaseMillis), first.timeoutMillis)
      ),
      Effect.match({
        onFailure: (error): ReadonlyArray<RenewReply> => requests.map(() => error),
        onSuccess: (reply): ReadonlyArray<RenewReply> =>
          Array.isArray(reply) && reply.length === requests.length
            ? reply.map((one) => one === 1)
            : requests.map(() => unexpected("renewAll", reply))
      })
    )
  }
  return Effect.gen(function* () {
    const wakeups =
      options.subscriber === undefined
        ? undefined
        : yield* Wakeups.make({
            subscriber: options.subscriber,
            leave: (key, waiterId, timeoutMillis) =>
              Effect.ignore(
                runScript(send, Scripts.leave, ...Scripts.leaveCall(key, waiterId, "PUBLISH"), timeoutMillis)
              )
          })
    return {
      description: options.description,
      ordered: options.ordered === true,
      acquire: (request) =>
        Effect.flatMap(
          runScript(send, Scripts.acquire, ...Scripts.acquireCall(request), request.timeoutMillis),
          parseAcquire
        ),
      renew: (request) =>
        Effect.map(
          runScript(
            send,
            Scripts.renew,
            [request.key],
            [request.token, String(request.leaseMillis)],
            request.timeoutMillis
          ),
          (reply) => reply === 1
        ),
      renewAll: (requests) => {
        if (requests.length === 0) return Effect.succeed([])
        const chunks: Array<ReadonlyArray<LeaseRequest>> = []
        for (let i = 0; i < requests.length; i += renewChunk) chunks.push(requests.slice(i, i + renewChunk))
        return Effect.map(Effect.forEach(chunks, renewChunkOf, { concurrency: "unbounded" }), (replies) =>
          replies.flat()
        )
      },
      transfer: (request) =>
        Effect.flatMap(
          runScript(send, Scripts.transfer, ...Scripts.transferCall(request), request.timeoutMillis),
          parseTransfer
        ),
      release: (request) =>
        Effect.map(
          runScript(send, Scripts.release, ...Scripts.releaseCall(request, "PUBLISH"), request.timeoutMillis),
          (reply) => reply === 1
        ),
      check: (request) =>
        Effect.map(
          runScript(send, Scripts.check, ...Scripts.checkCall(request), request.timeoutMillis),
          (reply) => typeof reply === "number" && reply !== -2
        ),
      ...(wakeups === undefined ? {} : { wakeups })
    } satisfies Backend
  })
}
