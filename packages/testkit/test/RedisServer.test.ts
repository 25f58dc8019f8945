import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { RedisServer, ServerBinary } from "../src/index.ts"
import { connect, isAlive } from "./support.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`RedisServer (${flavor})`, () => {
    it.live("starts, serves PING/SET/GET, and leaves no process or directory after the scope", () =>
      Effect.gen(function* () {
        const seen = yield* Effect.scoped(
          Effect.gen(function* () {
            const server = yield* RedisServer.start({ flavor })
            assert.isTrue(server.port >= 10000 && server.port <= 22767, `port ${server.port}`)
            assert.strictEqual(server.url, `redis://127.0.0.1:${server.port}`)
            assert.isTrue(isAlive(server.pid))
            assert.isTrue(Fs.existsSync(server.dir))
            const client = yield* connect(server.url)
            assert.strictEqual(yield* Effect.promise(() => client.ping()), "PONG")
            assert.strictEqual(yield* Effect.promise(() => client.set("k", "v")), "OK")
            assert.strictEqual(yield* Effect.promise(() => client.get("k")), "v")
            const info = String(yield* server.command("INFO", "server"))
            assert.include(info, flavor === "redis7" ? "redis_version:7." : "valkey_version:8.")
            assert.include(yield* server.logTail(), "Ready to accept connections")
            return { pid: server.pid, dir: server.dir }
          })
        )
        assert.isFalse(isAlive(seen.pid), "server process still alive after scope close")
        assert.isFalse(Fs.existsSync(seen.dir), "temp dir still present after scope close")
      })
    )

    it.live("pause makes commands time out; resume recovers; a paused server is still killed at scope close", () =>
      Effect.gen(function* () {
        const pid = yield* Effect.scoped(
          Effect.gen(function* () {
            const server = yield* RedisServer.start({ flavor })
            yield* server.pause
            assert.isTrue(server.paused)
            const error = yield* Effect.flip(server.commandWith({ timeoutMs: 300 }, "PING"))
            assert.strictEqual(error.reason, "Timeout")
            yield* server.resume
            assert.strictEqual(yield* server.command("PING"), "PONG")
            yield* server.pause
            return server.pid
          })
        )
        assert.isFalse(isAlive(pid))
      })
    )

    it.live("kill then restart serves again on the same port with an empty data set", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const { port, pid } = server
        yield* server.command("SET", "k", "v")
        yield* server.kill
        assert.isFalse(server.running)
        assert.isFalse(isAlive(pid))
        const down = yield* Effect.flip(server.command("PING"))
        assert.strictEqual(down.reason, "CommandFailed")
        yield* server.restart
        assert.strictEqual(server.port, port)
        assert.notStrictEqual(server.pid, pid)
        assert.strictEqual(yield* server.command("PING"), "PONG")
        assert.isNull(yield* server.command("GET", "k"))
        // restart also works on a running (and on a paused) server
        yield* server.pause
        yield* server.restart
        assert.strictEqual(yield* server.command("PING"), "PONG")
      })
    )

    it.live("command fails with the reply text; commandReply and commandWith return it", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor, args: ["--maxclients", "50"] })
        assert.strictEqual(
          yield* server.command("CONFIG", "GET", "maxclients").pipe(Effect.map(String)),
          "maxclients,50"
        )
        const error = yield* Effect.flip(server.command("NOSUCHCOMMAND"))
        assert.strictEqual(error.reason, "CommandFailed")
        assert.include(error.message, "unknown command")
        assert.match(String(yield* server.commandReply("NOSUCHCOMMAND")), /^ERR unknown command/)
        yield* server.command("ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", "-role")
        const asLocker = { username: "locker", password: "pw" }
        assert.strictEqual(yield* server.commandWith(asLocker, "PING"), "PONG")
        const denied = yield* server.commandWith({ ...asLocker, errorReplyAsValue: true }, "ROLE")
        assert.match(String(denied), /^NOPERM/)
      })
    )

    it.live("two servers get different ports; a fixed taken port fails with the log tail", () =>
      Effect.gen(function* () {
        const a = yield* RedisServer.start({ flavor })
        const b = yield* RedisServer.start({ flavor })
        assert.notStrictEqual(a.port, b.port)
        const error = yield* Effect.flip(RedisServer.start({ flavor, port: a.port }))
        assert.strictEqual(error.reason, "StartFailed")
        assert.include(error.message, "Address already in use")
        const bad = yield* Effect.flip(RedisServer.start({ flavor, args: ["--no-such-directive", "1"] }))
        assert.strictEqual(bad.reason, "StartFailed")
        assert.include(bad.message, "no-such-directive")
      })
    )
  })
}
