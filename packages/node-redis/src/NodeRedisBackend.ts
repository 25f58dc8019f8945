/**
 * The node-redis backend for `@sage/lock`: connects the `Lock` service to a standalone Redis or
 * Valkey server through a node-redis 5/6 client that lives as long as the layer.
 *
 * **Details**
 * - Every lock command carries its own timeout (what is left of the caller's budget), so a stalled
 *   server or a reconnecting client never stretches a deadline. node-redis queues commands while it
 *   reconnects; the timeout removes a queued command that was never written.
 * - The three lock scripts run by SHA1 and are re-sent transparently after `NOSCRIPT`.
 * - Socket errors are logged, never thrown: the client reconnects with a short capped backoff (20 ms
 *   doubling up to 500 ms, plus jitter) unless you pass your own `socket.reconnectStrategy`.
 * - Standalone lock operations are single commands on the shared, pipelined connection: none needs a
 *   dedicated connection. `dedicatedPool` is validated and reserved for replicated deployments.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { LockBackend } from "@sage/lock"
import { InvalidArgument, RedisError } from "@sage/lock/LockError"
import { createClient, type RedisClientOptions } from "redis"
import { classify } from "./internal/classify.ts"
import * as Scripts from "./internal/scripts.ts"

/**
 * Options of the standalone backend: node-redis `createClient` options plus the dedicated pool.
 *
 * @category options
 * @since 0.1.0
 */
export interface Options extends Omit<RedisClientOptions, "modules" | "functions" | "scripts" | "RESP"> {
  /** Connections for operations that need one connection for several commands. Default 10. */
  readonly dedicatedPool?: { readonly maxConnections?: number | undefined } | undefined
  /** How long the layer may take to connect before it fails. Default 10 seconds. */
  readonly connectTimeoutMillis?: number | undefined
}

type Client = ReturnType<typeof createClient>

const defaultReconnect = (retries: number): number => Math.min(20 * 2 ** retries, 500) + Math.floor(Math.random() * 50)

const validate = (options: Options): Effect.Effect<void, InvalidArgument> => {
  const max = options.dedicatedPool?.maxConnections
  if (max !== undefined && !(Number.isInteger(max) && max >= 1)) {
    return Effect.fail(
      new InvalidArgument({
        field: "dedicatedPool.maxConnections",
        value: String(max),
        reason: "must be an integer of at least 1"
      })
    )
  }
  const connect = options.connectTimeoutMillis
  if (connect !== undefined && !(Number.isFinite(connect) && connect > 0)) {
    return Effect.fail(
      new InvalidArgument({
        field: "connectTimeoutMillis",
        value: String(connect),
        reason: "must be finite and positive"
      })
    )
  }
  return Effect.void
}

const connect = (options: Options): Effect.Effect<Client, RedisError, Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context()
    const log = (effect: Effect.Effect<void>) => Effect.runForkWith(context)(effect)
    const { dedicatedPool: _pool, connectTimeoutMillis, ...clientOptions } = options
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
    const timeout = connectTimeoutMillis ?? 10_000
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

/** Sends one lock script, bounded by `timeoutMillis`, reloading it on NOSCRIPT. */
const runScript = (
  client: Client,
  script: Scripts.Script,
  key: string,
  args: ReadonlyArray<string>,
  timeoutMillis: number
): Effect.Effect<unknown, RedisError> => {
  const send = (mode: "EVALSHA" | "EVAL") =>
    Effect.tryPromise({
      try: (signal) =>
        client.sendCommand(Scripts.evalArgs(mode, script, key, args), {
          timeout: Math.max(1, Math.ceil(timeoutMillis)),
          abortSignal: signal
        }),
      catch: (error) => classify(`${mode} ${script.name}`, error)
    })
  return send("EVALSHA").pipe(
    Effect.catchIf(
      (error) => error.code === "NOSCRIPT",
      () => send("EVAL")
    )
  )
}

const unexpected = (command: string, reply: unknown): RedisError =>
  new RedisError({
    command,
    kind: "server",
    code: "UNEXPECTED",
    reply: `unexpected reply ${JSON.stringify(reply)}`,
    retryable: false,
    mayHaveExecuted: true
  })

/** The backend over a connected client. */
const fromClient = (client: Client, description: string): LockBackend.Backend => ({
  description,
  acquire: (request) =>
    Effect.flatMap(
      runScript(
        client,
        Scripts.acquire,
        request.key,
        [request.token, String(request.leaseMillis)],
        request.timeoutMillis
      ),
      (reply): Effect.Effect<LockBackend.AcquireReply, RedisError> => {
        if (Array.isArray(reply) && reply[0] === 1) return Effect.succeed({ _tag: "Acquired" })
        if (Array.isArray(reply) && reply[0] === 0 && typeof reply[1] === "number") {
          return Effect.succeed({ _tag: "Busy", remainingMillis: reply[1] })
        }
        return Effect.fail(unexpected("acquire", reply))
      }
    ),
  renew: (request) =>
    Effect.map(
      runScript(
        client,
        Scripts.renew,
        request.key,
        [request.token, String(request.leaseMillis)],
        request.timeoutMillis
      ),
      (reply) => reply === 1
    ),
  release: (request) =>
    Effect.map(
      runScript(client, Scripts.release, request.key, [request.token], request.timeoutMillis),
      (reply) => reply === 1
    )
})

/**
 * Connects a standalone client and returns the backend; the client closes with the scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  options: Options = {}
): Effect.Effect<LockBackend.Backend, RedisError | InvalidArgument, Scope.Scope> =>
  Effect.gen(function* () {
    yield* validate(options)
    const client = yield* connect(options)
    return fromClient(client, "node-redis standalone")
  })

/**
 * The `LockBackend` for one standalone Redis or Valkey server.
 *
 * @example
 * ```ts
 * import { Layer } from "effect"
 * import { Lock } from "@sage/lock"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const LockLive = Lock.layer({ namespace: "billing" }).pipe(
 *   Layer.provide(NodeRedisBackend.layer({ url: "redis://127.0.0.1:6379", socket: { connectTimeout: 2000 } }))
 * )
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<LockBackend.LockBackend, RedisError | InvalidArgument> =>
  Layer.effect(LockBackend.LockBackend, make(options))

/**
 * The options `layerConfig` reads from `Config`.
 *
 * @category options
 * @since 0.1.0
 */
export interface ConfigOptions {
  readonly url: string
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  readonly maxConnections?: number | undefined
}

/**
 * The standalone backend configured from `Config`, e.g. `REDIS_URL`.
 *
 * @example
 * ```ts
 * import { Config } from "effect"
 * import { NodeRedisBackend } from "@sage/lock-node-redis"
 *
 * const Backend = NodeRedisBackend.layerConfig({
 *   url: Config.String("REDIS_URL"),
 *   password: Config.Redacted("REDIS_PASSWORD").pipe(Config.withDefault(undefined))
 * })
 * ```
 *
 * @category layers
 * @since 0.1.0
 */
export const layerConfig = (
  options: Config.Wrap<ConfigOptions>
): Layer.Layer<LockBackend.LockBackend, RedisError | InvalidArgument | Config.ConfigError> =>
  Layer.effect(
    LockBackend.LockBackend,
    Effect.flatMap(Config.unwrap(options), (config) =>
      make({
        url: config.url,
        ...(config.username === undefined ? {} : { username: config.username }),
        ...(config.password === undefined ? {} : { password: Redacted.value(config.password) }),
        ...(config.maxConnections === undefined ? {} : { dedicatedPool: { maxConnections: config.maxConnections } })
      })
    )
  )
