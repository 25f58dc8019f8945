// The backend's connections to different addresses share one node-redis client class (node-redis
// rebuilds it, about 25 ms of CPU, whenever `createClient` is called with other options than the
// previous call's), and each still connects where its own options say.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import { makeClients } from "../src/internal/connection/clientClass.ts"

const [flavor] = ServerBinary.flavorsUnderTest()

const classOf = (client: object): unknown => Object.getPrototypeOf(client).constructor

describe(`node-redis clients of one backend on ${flavor}`, () => {
  it.live("connections to different servers share one class and each reaches its own server", () =>
    Effect.gen(function* () {
      const [a, b] = yield* Effect.all([RedisServer.start({ flavor: flavor! }), RedisServer.start({ flavor: flavor! })])
      const make = makeClients()
      const clients = [a, b, a, b].map((server) =>
        make({ socket: { host: "127.0.0.1", port: server.port, reconnectStrategy: false }, disableOfflineQueue: true })
      )
      yield* Effect.addFinalizer(() => Effect.sync(() => clients.forEach((client) => client.destroy())))
      assert.strictEqual(new Set(clients.map(classOf)).size, 1, "one class for every address")
      const ports = yield* Effect.forEach(clients, (client) =>
        Effect.promise(async () => {
          await client.connect()
          return Number((await client.configGet("port"))["port"])
        })
      )
      assert.deepStrictEqual(ports, [a.port, b.port, a.port, b.port])
    }).pipe(Effect.scoped)
  )

  it("a change in the options the class is built from builds another class", () => {
    const make = makeClients()
    const resp2 = make({ RESP: 2, url: "redis://127.0.0.1:1" })
    const resp3 = make({ RESP: 3, url: "redis://127.0.0.1:1" })
    const again = make({ RESP: 3, url: "redis://127.0.0.1:2" })
    assert.notStrictEqual(classOf(resp2), classOf(resp3))
    assert.strictEqual(classOf(resp3), classOf(again))
    assert.strictEqual(resp2.options?.RESP, 2)
    assert.strictEqual(again.options?.RESP, 3)
    assert.strictEqual(again.options?.url, "redis://127.0.0.1:2")
  })
})
