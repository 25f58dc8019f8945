import * as Effect from "effect/Effect"
import { PromiseClient } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import { RedisServer } from "@sage/lock-testkit"

const main = Effect.scoped(
  Effect.gen(function* () {
    const server = yield* RedisServer.start({ flavor: "redis7" })
    const client = PromiseClient.make(NodeRedisBackend.layer({ url: server.url }), { lock: { namespace: "p" } })
    const rate = yield* Effect.promise(async () => {
      let count = 0
      const end = performance.now() + Number(process.env["MILLIS"] ?? 5000)
      await Promise.all(
        Array.from({ length: 64 }, async (_, loop) => {
          while (performance.now() < end) {
            await client.using(`k${loop}`, { waitTimeout: 5_000 }, async () => {})
            count++
          }
        })
      )
      return count / (Number(process.env["MILLIS"] ?? 5000) / 1000)
    })
    console.log("rate", rate)
    yield* Effect.promise(() => client.close())
  })
)
Effect.runPromise(main)
