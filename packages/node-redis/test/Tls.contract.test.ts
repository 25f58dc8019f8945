// The lock contract over TLS: a TLS-only server (`--tls-port`, `--port 0`, certificates made for the
// test by the test kit) and the standalone backend connected with a `rediss://` URL that trusts the
// test's CA. A plain-TCP connection to the same port must fail, so the suite cannot pass by
// accident over plain TCP. The whole contract runs over TLS on one flavor (what TLS changes is the
// transport, the same node-redis socket for both); every flavor gets the TLS-only checks, which
// exercise its own TLS build. This keeps CI under its time budget.
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerControl } from "@sage/lock-testkit/contract/ServerControl"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { controlFor } from "./targets.ts"

const tlsTarget = (flavor: ServerBinary.Flavor): Layer.Layer<LockBackend | ServerControl, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor, tls: true })
      const backend = yield* NodeRedisBackend.make({ url: server.url, socket: { tls: true, ca: server.tls?.ca } })
      return Context.make(LockBackend, backend).pipe(Context.add(ServerControl, controlFor(server)))
    })
  )

const [contractFlavor] = ServerBinary.flavorsUnderTest()
if (contractFlavor !== undefined) {
  LockContract.suite(`${contractFlavor} standalone over TLS (rediss://)`, tlsTarget(contractFlavor))
}

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`${flavor} TLS-only server`, () => {
    it.live("speaks TLS only: rediss:// with the CA works, plain TCP and an untrusted CA fail", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor, tls: true })
        assert.match(server.url, /^rediss:\/\/127\.0\.0\.1:\d+$/)
        assert.isDefined(server.tls)
        assert.deepStrictEqual(yield* server.command("CONFIG", "GET", "port"), ["port", "0"])
        assert.deepStrictEqual(yield* server.command("CONFIG", "GET", "tls-port"), ["tls-port", String(server.port)])

        const plain = yield* Effect.flip(
          NodeRedisBackend.make({
            url: `redis://127.0.0.1:${server.port}`,
            connectTimeoutMillis: 2000,
            socket: { reconnectStrategy: false }
          })
        )
        assert.strictEqual(plain._tag, "LockRedisError")
        const untrusted = yield* Effect.flip(
          NodeRedisBackend.make({
            url: server.url,
            connectTimeoutMillis: 2000,
            socket: { tls: true, reconnectStrategy: false }
          })
        )
        assert.strictEqual(untrusted._tag, "LockRedisError")
      })
    )
  })
}
