// The standalone backends as the public constructors build them: the options checked before any
// I/O, and the connect they describe (`connections` pipelined connections, each replaced should it
// go silent), or the backend over a client the application shares.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend } from "@sage/lock/LockBackend"
import type { InvalidArgument } from "@sage/lock/LockError"
import type { RedisClientOptions } from "redis"
import * as Address from "../connection/address.ts"
import type { SharedClient } from "../connection/clients.ts"
import type { Connect } from "../connection/connecting.ts"
import { classify } from "../connection/classify.ts"
import * as SilentConnection from "../connection/silentConnection.ts"
import { checkClientOptions, type Common, invalid, unusableClient, validate } from "../options/validate.ts"
import { fromClients } from "./backend.ts"
import { connect } from "./connect.ts"

/** The standalone options (`NodeRedisBackend.Options`), as read here. */
export interface StandaloneOptions
  extends Omit<RedisClientOptions, "modules" | "functions" | "scripts" | "RESP">, Common {
  readonly connections?: number | undefined
}

/** The standalone options checked (no I/O), and the connect they describe. */
export const prepare = (options: StandaloneOptions): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const { connectTimeout } = yield* validate(options)
    yield* checkClientOptions("options", options)
    const connections = options.connections ?? 2
    if (!(Number.isInteger(connections) && connections >= 1 && connections <= 16)) {
      return yield* Effect.fail(invalid("connections", connections, "must be an integer from 1 to 16"))
    }
    const {
      dedicatedPool: _pool,
      connectTimeoutMillis: _timeout,
      connections: _connections,
      ...clientOptions
    } = options
    return Effect.gen(function* () {
      const [first, ...others] = yield* Effect.forEach(
        Array.from({ length: connections }),
        () =>
          SilentConnection.watch({
            open: connect(Address.withoutBracketedUrl(clientOptions) as RedisClientOptions, connectTimeout),
            classify
          }),
        { concurrency: "unbounded" }
      )
      return yield* fromClients([first!, ...others], "node-redis standalone")
    })
  })

/** The standalone backend over a client the application shares (`NodeRedisBackend.fromClient`). */
export const fromSharedClient = (client: SharedClient): Effect.Effect<Backend, InvalidArgument, Scope.Scope> =>
  Effect.suspend(() => {
    // A client never connected, or closed, would fail every command with "The client is closed".
    const unusable = unusableClient("client", client, {
      methods: ["sendCommand", "duplicate"],
      what: "client (createClient)"
    })
    if (unusable !== undefined) return Effect.fail(unusable)
    return fromClients([client], "node-redis standalone (shared client)")
  })
