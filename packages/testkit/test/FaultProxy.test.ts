import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { FaultProxy, RedisServer, ServerBinary } from "../src/index.ts"
import { connect, timed, within } from "./support.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`FaultProxy (${flavor})`, () => {
    const setup = Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const proxy = yield* FaultProxy.make({ upstreamPort: server.port })
      return { server, proxy }
    })

    it.live("forwards a node-redis client transparently", () =>
      Effect.gen(function* () {
        const { proxy, server } = yield* setup
        assert.notStrictEqual(proxy.port, server.port)
        const client = yield* connect(proxy.url)
        assert.strictEqual(yield* Effect.promise(() => client.set("k", "v")), "OK")
        assert.strictEqual(yield* Effect.promise(() => client.get("k")), "v")
        assert.strictEqual(proxy.connectionCount, 1)
        // a large value crosses in many chunks and arrives intact
        const big = "x".repeat(1 << 20)
        yield* Effect.promise(() => client.set("big", big))
        assert.strictEqual(yield* Effect.promise(() => client.get("big")), big)
      })
    )

    it.live("stall holds a command without an answer; heal delivers it", () =>
      Effect.gen(function* () {
        const { proxy } = yield* setup
        const client = yield* connect(proxy.url)
        yield* proxy.stall
        const pending = client.set("stalled", "1")
        assert.strictEqual(yield* within(pending, 300), "no reply")
        yield* proxy.heal
        assert.strictEqual(yield* within(pending, 2000), "OK")
        assert.strictEqual(yield* Effect.promise(() => client.get("stalled")), "1")
      })
    )

    it.live("stallOpen silences the connections open now; new ones pass; heal delivers the held command", () =>
      Effect.gen(function* () {
        const { proxy } = yield* setup
        const old = yield* connect(proxy.url)
        yield* proxy.stallOpen
        const pending = old.set("held", "1")
        assert.strictEqual(yield* within(pending, 300), "no reply")
        const fresh = yield* connect(proxy.url)
        assert.strictEqual(yield* Effect.promise(() => fresh.ping()), "PONG")
        assert.isNull(yield* Effect.promise(() => fresh.get("held")), "the held command never reached the server")
        yield* proxy.heal
        assert.strictEqual(yield* within(pending, 2000), "OK")
        assert.strictEqual(yield* Effect.promise(() => fresh.get("held")), "1")
      })
    )

    it.live("setLatency adds measurable delay per direction", () =>
      Effect.gen(function* () {
        const { proxy } = yield* setup
        const client = yield* connect(proxy.url)
        const ping = timed(Effect.promise(() => client.ping()))
        const [base] = yield* ping
        yield* proxy.setLatency(100, "up")
        const [up] = yield* ping
        assert.isAtLeast(up, 80, `up latency: ${up} ms (baseline ${base} ms)`)
        yield* proxy.setLatency(100, "both")
        const [both, reply] = yield* ping
        assert.strictEqual(reply, "PONG")
        assert.isAtLeast(both, 180, `both-way latency: ${both} ms`)
        yield* proxy.pass
        const [after] = yield* ping
        assert.isBelow(after, both, `after pass: ${after} ms, with latency: ${both} ms`)
      })
    )

    it.live("loseNextReply: the client sees an error, yet the server executed the command", () =>
      Effect.gen(function* () {
        const { proxy, server } = yield* setup
        const client = yield* connect(proxy.url)
        yield* proxy.loseNextReply
        const outcome = yield* Effect.promise(() =>
          client.set("lost", "tokA").then(
            (reply) => ({ ok: true, text: String(reply) }),
            (error: unknown) => ({ ok: false, text: String(error) })
          )
        )
        assert.isFalse(outcome.ok, `expected an error, got ${outcome.text}`)
        assert.strictEqual(proxy.lostReplies, 1)
        assert.strictEqual(yield* server.command("GET", "lost"), "tokA")
        // later connections are unaffected
        const again = yield* connect(proxy.url)
        assert.strictEqual(yield* Effect.promise(() => again.get("lost")), "tokA")
      })
    )

    it.live("resetAll breaks live connections; refuse rejects new ones until accept; closeAll ends them", () =>
      Effect.gen(function* () {
        const { proxy } = yield* setup
        const client = yield* connect(proxy.url)
        yield* proxy.stall
        const pending = client.ping().then(
          () => "answered",
          () => "failed"
        )
        yield* proxy.resetAll
        assert.strictEqual(yield* within(pending, 2000), "failed")
        yield* proxy.heal
        yield* proxy.refuse
        const refused = yield* Effect.flip(connect(proxy.url))
        assert.isDefined(refused)
        assert.strictEqual(proxy.connectionCount, 0)
        yield* proxy.accept
        const fresh = yield* connect(proxy.url)
        assert.strictEqual(yield* Effect.promise(() => fresh.ping()), "PONG")
        yield* proxy.closeAll
        const closed = yield* Effect.promise(() =>
          fresh.ping().then(
            () => "answered",
            () => "failed"
          )
        )
        assert.strictEqual(closed, "failed")
      })
    )

    it.live("the proxy survives an upstream restart: new connections reach the new process", () =>
      Effect.gen(function* () {
        const { proxy, server } = yield* setup
        const client = yield* connect(proxy.url)
        yield* server.kill
        const broken = yield* Effect.promise(() =>
          client.ping().then(
            () => "answered",
            () => "failed"
          )
        )
        assert.strictEqual(broken, "failed")
        const refused = yield* Effect.flip(connect(proxy.url))
        assert.isDefined(refused)
        yield* server.restart
        const fresh = yield* connect(proxy.url)
        assert.strictEqual(yield* Effect.promise(() => fresh.ping()), "PONG")
      })
    )
  })
}
