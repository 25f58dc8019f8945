import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { RedisServer, ServerBinary } from "../src/index.ts"
import { isAlive } from "./support.ts"

// Redis 8.0 and Valkey 9.1: like the suites' flavors, a requested one whose binary is missing fails
// here at collection (CI requests every flavor); outside CI, toolchain.sh leaves out what it could not
// provision (SAGE_TEST_FLAVORS), and a run that names neither does not collect this file
// (vitest.config.ts).
const flavors = ServerBinary.flavorsUnderTest(ServerBinary.newer)

const versionLine: Record<ServerBinary.Flavor, string> = {
  redis7: "redis_version:7.",
  valkey8: "valkey_version:8.",
  redis8: "redis_version:8.",
  valkey9: "valkey_version:9."
}

// HGETALL as an object: fields with a TTL may come back in expiry order rather than insertion order.
const fields = (reply: RedisServer.Reply): Record<string, unknown> => {
  const flat: ReadonlyArray<unknown> = Array.isArray(reply) ? reply : []
  const out: Record<string, unknown> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1]
  return out
}

for (const flavor of flavors) {
  describe(`newer server (${flavor})`, () => {
    it.live("starts on a random port in a temp dir, reports its version, and leaves nothing after the scope", () =>
      Effect.gen(function* () {
        const seen = yield* Effect.scoped(
          Effect.gen(function* () {
            const server = yield* RedisServer.start({ flavor })
            assert.strictEqual(server.flavor, flavor)
            assert.isTrue(server.port >= 10000 && server.port <= 22767, `port ${server.port}`)
            assert.isTrue(isAlive(server.pid))
            assert.isTrue(Fs.existsSync(server.dir))
            const info = String(yield* server.command("INFO", "server"))
            assert.include(info, versionLine[flavor])
            assert.include(info, `tcp_port:${server.port}`)
            assert.include(yield* server.logTail(), "Ready to accept connections")
            return { pid: server.pid, dir: server.dir }
          })
        )
        assert.isFalse(isAlive(seen.pid), "server process still alive after scope close")
        assert.isFalse(Fs.existsSync(seen.dir), "temp dir still present after scope close")
      })
    )

    it.live("expires single hash fields (HPEXPIRE, HSETEX, HPTTL), and HGETALL omits the expired ones", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        assert.strictEqual(yield* server.command("HSET", "h", "a", "1", "b", "2"), 2)
        assert.deepStrictEqual(yield* server.command("HPEXPIRE", "h", "200", "FIELDS", "1", "a"), [1])
        assert.strictEqual(yield* server.command("HSETEX", "h", "PX", "200", "FIELDS", "1", "c", "3"), 1)
        const ttls = yield* server.command("HPTTL", "h", "FIELDS", "4", "a", "b", "c", "missing")
        const [a, b, c, missing]: ReadonlyArray<unknown> = Array.isArray(ttls) ? ttls : []
        for (const ttl of [a, c]) assert.isTrue(typeof ttl === "number" && ttl > 0 && ttl <= 200, `ttl ${ttl}`)
        assert.strictEqual(b, -1)
        assert.strictEqual(missing, -2)
        assert.deepStrictEqual(fields(yield* server.command("HGETALL", "h")), { a: "1", b: "2", c: "3" })
        yield* Effect.sleep(400)
        assert.deepStrictEqual(fields(yield* server.command("HGETALL", "h")), { b: "2" })
        assert.deepStrictEqual(yield* server.command("HPTTL", "h", "FIELDS", "1", "a"), [-2])
      })
    )
  })
}
