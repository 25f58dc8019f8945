// The helpers the fault matrix added to the test kit: a BUSY server, killing ordinary clients,
// deleting populated filler keys, TLS-only servers, and ACL users with the documented lines.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Acl, Faults, RedisServer, ServerBinary } from "../src/index.ts"
import { connect } from "./support.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`test kit fault helpers (${flavor})`, () => {
    it.live("busyScript: other clients get BUSY while it runs, then the server answers again", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const during = yield* Effect.forkChild(
          Effect.andThen(
            Effect.sleep(300),
            server.commandWith({ errorReplyAsValue: true, timeoutMs: 2000 }, "GET", "k")
          )
        )
        yield* Effect.scoped(Faults.busyScript(server, 800))
        const reply = yield* Fiber.join(during)
        assert.match(String(reply), /^BUSY/)
        assert.strictEqual(yield* server.command("PING"), "PONG")
        assert.deepStrictEqual(yield* server.command("CONFIG", "GET", "busy-reply-threshold"), [
          "busy-reply-threshold",
          "5000"
        ])
      })
    )

    it.live("killNormalClients closes ordinary connections", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* connect(server.url)
        assert.isAtLeast(yield* Faults.killNormalClients(server), 1)
      })
    )

    it.live("unpopulate removes what populate made", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* Faults.populate(server, 1000, "filler")
        assert.strictEqual(yield* server.command("DBSIZE"), 1000)
        yield* Faults.unpopulate(server, 1000, "filler")
        assert.strictEqual(yield* server.command("DBSIZE"), 0)
      })
    )

    it.live("a TLS-only server: rediss:// URL, admin commands over TLS, no plain port", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor, tls: true })
        assert.isTrue(server.url.startsWith("rediss://"))
        assert.include(server.tls?.ca ?? "", "BEGIN CERTIFICATE")
        assert.deepStrictEqual(yield* server.command("CONFIG", "GET", "port"), ["port", "0"])
        yield* server.restart
        assert.strictEqual(yield* server.command("PING"), "PONG")
      })
    )

    it.live("Acl.createUser: the user may run the mode's commands on the namespace only", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* Acl.createUser([server], "standalone", { user: "locker", password: "pw", namespace: "ns" })
        const as = { username: "locker", password: "pw", errorReplyAsValue: true }
        assert.strictEqual(yield* server.commandWith(as, "SET", "ns:{k}", "v"), "OK")
        assert.match(String(yield* server.commandWith(as, "SET", "other:{k}", "v")), /^NOPERM/)
        assert.match(String(yield* server.commandWith(as, "ROLE")), /^NOPERM/)
        assert.isTrue((yield* Acl.denials(server)).length >= 2)
      })
    )
  })
}
