// Test targets: a real server started by the test kit, the ioredis backend on it (over its own
// connections, or over a client the test owns as an application would), and the ServerControl the
// contract suite uses on that same server.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Redis } from "ioredis"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, type ServerBinary } from "@sage/lock-testkit"
import * as ServerControl from "@sage/lock-testkit/contract/ServerControl"
import * as IoredisBackend from "../src/IoredisBackend.ts"

export type Target = Layer.Layer<LockBackend | ServerControl.ServerControl, unknown>

/** A server of `flavor` and the backend over connections of its own. */
export const ownTarget = (flavor: ServerBinary.Flavor, options: IoredisBackend.Options = {}): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const backend = yield* IoredisBackend.make({ host: "127.0.0.1", port: server.port, ...options })
      return Context.make(LockBackend, backend).pipe(
        Context.add(ServerControl.ServerControl, ServerControl.ofServer(server))
      )
    })
  )

/** An ioredis client on `url` that the test owns, closed (then dropped) with the scope. */
export const ownedClient = (url: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Redis(url, { retryStrategy: () => 50 })
      client.on("error", () => {})
      return client
    }),
    (client) =>
      Effect.promise(() => client.quit().catch(() => undefined)).pipe(
        Effect.timeoutOption(1_000),
        Effect.ensuring(Effect.sync(() => client.disconnect()))
      )
  )

/** A server of `flavor` and the backend over a client the test owns (as an application would). */
export const sharedTarget = (flavor: ServerBinary.Flavor): Target =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const client = yield* ownedClient(server.url)
      const backend = yield* IoredisBackend.fromClient(client)
      return Context.make(LockBackend, backend).pipe(
        Context.add(ServerControl.ServerControl, ServerControl.ofServer(server))
      )
    })
  )
