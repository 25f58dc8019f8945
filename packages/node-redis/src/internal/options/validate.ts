// Checks of the node-redis backends' options, before any I/O: a bad option fails the layer at once
// with `InvalidArgument` naming the field, and nothing that may hold a password (a URL, an address
// with credentials) reaches the error.
import * as Effect from "effect/Effect"
import { InvalidArgument } from "@sage/lock/LockError"
import * as Address from "../connection/address.ts"
import { maxTimerMillis } from "../connection/timerDelay.ts"
import { valueText } from "./valueText.ts"

/** The options every deployment shares (`NodeRedisBackend.CommonOptions`), as read here. */
export interface Common {
  readonly dedicatedPool?: { readonly maxConnections?: number | undefined } | undefined
  readonly connectTimeoutMillis?: number | undefined
}

// Values and reasons can hold URLs or addresses with credentials: passwords never reach an error.
export const invalid = (field: string, value: unknown, reason: string): InvalidArgument =>
  new InvalidArgument({
    field,
    value: Address.redactCredentials(valueText(value)),
    reason: Address.redactCredentials(reason)
  })

/**
 * A URL node-redis would throw on (with the password on the error) is refused here instead. The
 * value is shown with everything before its last `@` hidden: a URL that does not parse cannot be
 * trusted to say where its password ends.
 */
const checkUrl = (field: string, url: unknown): Effect.Effect<void, InvalidArgument> => {
  const problem = url === undefined ? undefined : Address.checkRedisUrl(url)
  return problem === undefined
    ? Effect.void
    : Effect.fail(invalid(field, typeof url === "string" ? Address.redactUrl(url) : url, `the URL ${problem}`))
}

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Whether `value` is an object with these methods (a client of the kind a function expects). */
const hasMethods = (value: unknown, names: ReadonlyArray<string>): boolean =>
  typeof value === "object" &&
  value !== null &&
  names.every((name) => typeof (value as Record<string, unknown>)[name] === "function")

/**
 * Why a client the application passes (`fromClient`, `fromSentinel`, `fromCluster`) cannot be
 * used, if it cannot: it is not the kind of node-redis client asked for, or it is not connected.
 */
export const unusableClient = (
  field: string,
  client: unknown,
  kind: { readonly methods: ReadonlyArray<string>; readonly what: string; readonly also?: boolean }
): InvalidArgument | undefined => {
  if (!hasMethods(client, kind.methods) || kind.also === false) {
    return invalid(field, typeof client, `must be a node-redis ${kind.what}`)
  }
  if ((client as { readonly isOpen?: unknown }).isOpen !== true) {
    return invalid(field, "not connected", "connect the client before building the lock on it")
  }
  return undefined
}

/**
 * node-redis client options the lock passes on (the standalone options, a Sentinel's node or
 * sentinel options, a Cluster's defaults): an object, its URL one node-redis can parse, and a
 * `socket` that names a usable host and port when it names them. node-redis would otherwise throw
 * with the URL (and its password) on the error, or quietly connect to 127.0.0.1:6379.
 */
export const checkClientOptions = (field: string, options: unknown): Effect.Effect<void, InvalidArgument> =>
  Effect.gen(function* () {
    if (options === undefined) return
    if (!isRecord(options)) return yield* invalid(field, options, "must be an options object")
    const prefix = field === "options" ? "" : `${field}.`
    yield* checkUrl(`${prefix}url`, options["url"])
    for (const name of ["username", "password"]) {
      const value = options[name]
      // The value itself is never shown: it may be the password.
      if (value !== undefined && typeof value !== "string") {
        return yield* invalid(`${prefix}${name}`, typeof value, "must be a string")
      }
    }
    const database = options["database"]
    if (database !== undefined && !(Number.isInteger(database) && (database as number) >= 0)) {
      return yield* invalid(`${prefix}database`, database, "must be an integer of at least 0")
    }
    const socket = options["socket"]
    if (socket === undefined) return
    if (!isRecord(socket)) return yield* invalid(`${field}.socket`, socket, "must be an object")
    const host = socket["host"]
    if (host !== undefined) {
      const problem = Address.checkHost(host)
      if (problem !== undefined) return yield* invalid(`${field}.socket.host`, host, problem)
    }
    const port = socket["port"]
    if (port !== undefined) {
      const problem = Address.checkPort(port)
      if (problem !== undefined) return yield* invalid(`${field}.socket.port`, port, problem)
    }
  })

/** The options every deployment shares, checked, with their defaults. */
export const validate = (
  options: Common
): Effect.Effect<{ maxConnections: number; connectTimeout: number }, InvalidArgument> => {
  if (!isRecord(options as unknown)) return Effect.fail(invalid("options", options, "must be an options object"))
  const pool = options.dedicatedPool
  if (pool !== undefined && !isRecord(pool as unknown)) {
    return Effect.fail(invalid("dedicatedPool", pool, "must be an object, e.g. { maxConnections: 10 }"))
  }
  const max = pool?.maxConnections ?? 10
  if (!(Number.isInteger(max) && max >= 1)) {
    return Effect.fail(invalid("dedicatedPool.maxConnections", max, "must be an integer of at least 1"))
  }
  const connectTimeout = options.connectTimeoutMillis ?? 10_000
  if (!(typeof connectTimeout === "number" && connectTimeout > 0 && connectTimeout <= maxTimerMillis)) {
    return Effect.fail(
      invalid(
        "connectTimeoutMillis",
        connectTimeout,
        `must be positive and at most ${maxTimerMillis} (about 24.8 days)`
      )
    )
  }
  return Effect.succeed({ maxConnections: max, connectTimeout })
}

/** A Sentinel deployment's master name and sentinels, as every Sentinel backend reads them. */
export const checkSentinels = (name: unknown, sentinels: unknown): Effect.Effect<void, InvalidArgument> =>
  Effect.gen(function* () {
    if (typeof name !== "string" || name.length === 0) {
      return yield* invalid("name", name, "the master name must be a non-empty string")
    }
    if (!Array.isArray(sentinels) || sentinels.length === 0) {
      return yield* invalid("sentinels", sentinels, "at least one sentinel is needed")
    }
    for (const node of sentinels as ReadonlyArray<{ readonly host?: unknown; readonly port?: unknown } | undefined>) {
      const problem = Address.checkHost(node?.host) ?? Address.checkPort(node?.port)
      if (problem !== undefined) return yield* invalid("sentinels", node, problem)
    }
  })
