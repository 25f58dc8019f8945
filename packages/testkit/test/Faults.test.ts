import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Faults, RedisServer, ServerBinary } from "../src/index.ts"
import { connect, timed } from "./support.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`Faults (${flavor})`, () => {
    it.live("debugSleep returns while the server still sleeps and stalls other clients", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connect(server.url)
        yield* Effect.scoped(Faults.debugSleep(server, 1))
        // The helper's scope closed; the server sleeps on regardless of the helper's connection.
        const [waited, reply] = yield* timed(Effect.promise(() => client.ping()))
        assert.strictEqual(reply, "PONG")
        assert.isAtLeast(waited, 300, `PING answered after ${waited} ms, so debugSleep returned late`)
      })
    )

    it.live("debugSleep inside a scope: a command times out during the sleep", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* Faults.debugSleep(server, 0.5)
        const error = yield* Effect.flip(server.commandWith({ timeoutMs: 200 }, "PING"))
        assert.strictEqual(error.reason, "Timeout")
      })
    )

    it.live("clientPause WRITE delays writes but not reads", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const client = yield* connect(server.url)
        yield* Faults.clientPause(server, 400, "WRITE")
        const [read] = yield* timed(Effect.promise(() => client.get("k")))
        const [write] = yield* timed(Effect.promise(() => client.set("k", "v")))
        assert.isAtLeast(write, 200, `SET took ${write} ms`)
        assert.isBelow(read, write, `GET (${read} ms) was delayed like SET (${write} ms)`)
      })
    )

    it.live("stealKey overwrites, deleteKey removes", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* server.command("SET", "lock:a", "tokA", "PX", "30000")
        yield* Faults.stealKey(server, "lock:a", "tokOTHER")
        assert.strictEqual(yield* server.command("GET", "lock:a"), "tokOTHER")
        assert.strictEqual(yield* server.command("TTL", "lock:a"), -1)
        yield* Faults.stealKey(server, "lock:a", "tokB", 5000)
        const pttl = Number(yield* server.command("PTTL", "lock:a"))
        assert.isTrue(pttl > 0 && pttl <= 5000, `PTTL ${pttl}`)
        assert.strictEqual(yield* Faults.deleteKey(server, "lock:a"), 1)
        assert.strictEqual(yield* Faults.deleteKey(server, "lock:a"), 0)
      })
    )

    it.live("killClientsByName kills exactly the named connections", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const victim = yield* connect(server.url, { name: "locklib-test" })
        const bystander = yield* connect(server.url, { name: "other" })
        assert.strictEqual(yield* Faults.killClientsByName(server, "locklib-test"), 1)
        const outcome = yield* Effect.promise(() =>
          victim.ping().then(
            () => "answered",
            () => "failed"
          )
        )
        assert.strictEqual(outcome, "failed")
        assert.strictEqual(yield* Effect.promise(() => bystander.ping()), "PONG")
        assert.strictEqual(yield* Faults.killClientsByName(server, "locklib-test"), 0)
      })
    )

    it.live("setMaxMemory with noeviction makes writes fail with OOM", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* Faults.populate(server, 20000)
        yield* Faults.setMaxMemory(server, 1024 * 1024, "noeviction")
        assert.match(String(yield* server.commandReply("SET", "lock:a", "tok", "NX", "PX", "1000")), /^OOM/)
        assert.strictEqual(
          yield* server.command("CONFIG", "GET", "maxmemory-policy").pipe(Effect.map(String)),
          "maxmemory-policy,noeviction"
        )
        yield* Faults.setMaxMemory(server, 0, "noeviction")
        assert.strictEqual(yield* server.command("SET", "lock:a", "tok", "NX", "PX", "1000"), "OK")
      })
    )

    it("parseClientList reads fields", () => {
      const parsed = Faults.parseClientList(
        "id=3 addr=127.0.0.1:1 name=a cmd=client\nid=4 addr=127.0.0.1:2 name= cmd=get\n"
      )
      assert.deepStrictEqual(
        parsed.map((fields) => [fields["id"], fields["name"]]),
        [
          ["3", "a"],
          ["4", ""]
        ]
      )
    })
  })
}
