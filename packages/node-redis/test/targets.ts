// Test targets: a real server started by the test kit, the node-redis backend connected to it, and
// the ServerControl the contract suite uses to observe and disturb that same server.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, type ServerBinary } from "@sage/lock-testkit"
import { ServerControl } from "@sage/lock-testkit/contract/ServerControl"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

/** The contract's view of one standalone server. */
export const controlFor = (server: RedisServer.RedisServer): ServerControl["Service"] => ({
  label: `${server.flavor} standalone`,
  get: (key) =>
    Effect.orDie(server.command("GET", key)).pipe(Effect.map((reply) => (reply === null ? null : String(reply)))),
  set: (key, value, pxMillis) =>
    Effect.orDie(
      pxMillis === undefined
        ? server.command("SET", key, value)
        : server.command("SET", key, value, "PX", String(pxMillis))
    ).pipe(Effect.asVoid),
  del: (key) => Effect.orDie(server.command("DEL", key)).pipe(Effect.asVoid),
  pttl: (key) => Effect.orDie(server.command("PTTL", key)).pipe(Effect.map(Number)),
  command: (_key, ...args) => Effect.orDie(server.command(...args)),
  pause: () => Effect.orDie(server.pause),
  resume: () => Effect.orDie(server.resume)
})

/** A server of `flavor` and the standalone backend on it, as the contract suite's target. */
export const standaloneTarget = (
  flavor: ServerBinary.Flavor,
  options: NodeRedisBackend.Options = {}
): Layer.Layer<LockBackend | ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const backend = yield* NodeRedisBackend.make({ url: server.url, ...options })
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl, controlFor(server)))
    })
  )
