// Passwords never leave the backend in anything a user or operator sees: the errors a layer or a
// call fails with (message, fields, cause chain, however they are printed), the logs the backend
// writes, the spans it records, and InvalidArgument values. Each case uses a URL or options that
// carry a password: a bad host, a wrong password, an invalid option, malformed addresses.
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Tracer from "effect/Tracer"
import * as Util from "node:util"
import { Lock } from "@sage/lock"
import type { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

const secret = "Sup3r-s3cret-PW"
const encodedSecret = encodeURIComponent(secret)

/** Every way an error or cause is commonly printed or serialised. */
const renderings = (value: unknown): Array<string> => {
  const out = [String(value), Util.inspect(value, { depth: 30, showHidden: true, getters: true })]
  try {
    out.push(JSON.stringify(value) ?? "")
  } catch {
    // Cyclic: the other renderings cover it.
  }
  if (value instanceof Error) out.push(value.message, value.stack ?? "")
  return out
}

const assertNoSecret = (what: string, value: unknown): void => {
  for (const text of renderings(value)) {
    assert.notInclude(text, secret, `${what} leaks the password: ${text.slice(0, 400)}`)
    assert.notInclude(text, encodedSecret, `${what} leaks the password (URL-encoded)`)
  }
}

interface Captured {
  readonly logs: Array<unknown>
  readonly spans: Array<Tracer.NativeSpan>
}

/** Runs `effect` with every log line and span captured, and checks its outcome, logs and spans. */
const checkRun = <A, E>(what: string, effect: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const captured: Captured = { logs: [], spans: [] }
    const logger = Logger.make((options) => {
      captured.logs.push({ message: options.message, cause: Cause.pretty(options.cause) })
    })
    const tracer = Tracer.make({
      span(options) {
        const span = new Tracer.NativeSpan(options)
        captured.spans.push(span)
        return span
      }
    })
    const exit = yield* effect.pipe(
      Effect.provide(Logger.layer([logger])),
      Effect.provideService(Tracer.Tracer, tracer),
      Effect.exit
    )
    if (Exit.isFailure(exit)) {
      assertNoSecret(`${what}: the failure`, exit.cause)
      assertNoSecret(`${what}: the printed cause`, Cause.pretty(exit.cause))
      for (const reason of exit.cause.reasons) assertNoSecret(`${what}: a cause reason`, reason)
    }
    assertNoSecret(`${what}: the logs`, captured.logs)
    for (const span of captured.spans) {
      assertNoSecret(`${what}: span ${span.name}`, [...span.attributes.entries()])
    }
    return exit
  })

// The lock's layer over the backend's, as an application builds them: the backend layers connect in
// the background, and a connection's failure surfaces when the lock's layer waits for it.
const build = (layer: Layer.Layer<LockBackend, unknown, never>) =>
  Effect.scoped(Layer.build(Lock.layer().pipe(Layer.provide(layer))))

const fromEnv = (env: Record<string, string>) => ConfigProvider.layer(ConfigProvider.fromUnknown(env))

describe("passwords stay out of errors, logs, spans and InvalidArgument values", () => {
  it.live("a URL with credentials and an unreachable host (connection refused)", () =>
    Effect.gen(function* () {
      const exit = yield* checkRun(
        "refused",
        build(
          NodeRedisBackend.layer({ url: `redis://locker:${encodedSecret}@127.0.0.1:1`, connectTimeoutMillis: 2000 })
        )
      )
      assert.isTrue(Exit.isFailure(exit))
    })
  )

  it.live("a URL with credentials and a host name that does not resolve", () =>
    Effect.gen(function* () {
      const exit = yield* checkRun(
        "unresolvable",
        build(
          NodeRedisBackend.layer({
            url: `redis://locker:${encodedSecret}@no-such-host.invalid:6379`,
            connectTimeoutMillis: 2000
          })
        )
      )
      assert.isTrue(Exit.isFailure(exit))
    })
  )

  it.live("invalid options next to a password: a URL that is not a URL, a bad port, a bad timeout", () =>
    Effect.gen(function* () {
      const bad = [
        `redis://locker:${encodedSecret}@127.0.0.1:notaport`,
        `http://locker:${encodedSecret}@127.0.0.1:6379`,
        `redis://locker:${encodedSecret}@[::1:6379`
      ]
      for (const url of bad) {
        const exit = yield* checkRun(
          `url ${url.slice(0, 8)}`,
          build(NodeRedisBackend.layer({ url, connectTimeoutMillis: 2000 }))
        )
        assert.isTrue(Exit.isFailure(exit), url)
      }
      const root = yield* checkRun(
        "cluster root node",
        build(
          NodeRedisBackend.layerCluster({
            rootNodes: [{ url: `redis://locker:${encodedSecret}@127.0.0.1:notaport` }],
            connectTimeoutMillis: 2000
          })
        )
      )
      assert.isTrue(Exit.isFailure(root))
      const timeout = yield* checkRun(
        "bad timeout",
        build(
          NodeRedisBackend.layer({ url: `redis://locker:${encodedSecret}@127.0.0.1:6379`, connectTimeoutMillis: -1 })
        )
      )
      assert.isTrue(Exit.isFailure(timeout))
    })
  )

  it.live("a password written unencoded (with / # ? , @ or a space) is hidden whole, wherever the URL is given", () =>
    Effect.gen(function* () {
      for (const raw of ["pa/ss", "pa#ss", "pa?ss", "pa,ss", "pa ss", "p@ss:w"]) {
        // Port 1: nothing listens there, so a URL that does parse fails to connect.
        const url = `redis://locker:${raw}${secret}@127.0.0.1:1`
        const parses = URL.parse(url) !== null
        const layers = {
          url: NodeRedisBackend.layer({ url, connectTimeoutMillis: 2000 }),
          "cluster root": NodeRedisBackend.layerCluster({ rootNodes: [{ url }], connectTimeoutMillis: 2000 }),
          "cluster defaults": NodeRedisBackend.layerCluster({
            rootNodes: [{ url: "redis://127.0.0.1:1" }],
            defaults: { url },
            connectTimeoutMillis: 2000
          }),
          "sentinel nodes": NodeRedisBackend.layerSentinel({
            name: "mymaster",
            sentinels: [{ host: "127.0.0.1", port: 1 }],
            nodeClientOptions: { url },
            connectTimeoutMillis: 2000
          }),
          "sentinel sentinels": NodeRedisBackend.layerSentinel({
            name: "mymaster",
            sentinels: [{ host: "127.0.0.1", port: 1 }],
            sentinelClientOptions: { url },
            connectTimeoutMillis: 2000
          })
        }
        for (const [where, layer] of Object.entries(layers)) {
          const exit = yield* checkRun(`${where} with ${JSON.stringify(raw)}`, build(layer))
          // One that does not parse is refused before any connection, as InvalidArgument (never a
          // thrown TypeError carrying the URL); one that does (`,` and `@` are allowed) fails to connect.
          assert.isTrue(Exit.isFailure(exit), where)
          const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
          const expected = parses ? "LockRedisError" : "InvalidArgument"
          assert.strictEqual((error as { _tag?: string })._tag, expected, `${where} ${raw}`)
        }
      }
    })
  )

  it.live("Config layers: a bad node list or sentinel list carrying credentials is InvalidArgument without them", () =>
    Effect.gen(function* () {
      const cluster = yield* checkRun(
        "cluster nodes",
        build(
          NodeRedisBackend.layerClusterConfig({ nodes: Config.String("NODES") }).pipe(
            Layer.provide(
              fromEnv({ NODES: `redis://locker:${encodedSecret}@127.0.0.1:7000,http://locker:${secret}@h:1` })
            )
          )
        )
      )
      assert.isTrue(Exit.isFailure(cluster))
      const sentinels = yield* checkRun(
        "sentinels",
        build(
          NodeRedisBackend.layerSentinelConfig({
            name: Config.succeed("mymaster"),
            sentinels: Config.String("SENTINELS")
          }).pipe(Layer.provide(fromEnv({ SENTINELS: `locker:${secret}@127.0.0.1:26379` })))
        )
      )
      assert.isTrue(Exit.isFailure(sentinels))
    })
  )

  for (const flavor of ServerBinary.flavorsUnderTest()) {
    it.live(`${flavor}: a wrong password (WRONGPASS), and a lock cycle and an outage with the right one`, () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* server.command("ACL", "SETUSER", "locker", "on", `>${secret}`, "~*", "&*", "+@all")
        const wrong = yield* checkRun(
          "wrong password",
          build(
            NodeRedisBackend.layer({
              url: `redis://locker:${encodedSecret}x@127.0.0.1:${server.port}`,
              connectTimeoutMillis: 2000
            })
          )
        )
        assert.isTrue(Exit.isFailure(wrong))
        const configured = yield* checkRun(
          "wrong password via Config",
          build(
            NodeRedisBackend.layerConfig({
              url: Config.succeed(server.url),
              username: Config.succeed("locker"),
              password: Config.Redacted("PASSWORD")
            }).pipe(Layer.provide(fromEnv({ PASSWORD: `${secret}x` })))
          )
        )
        assert.isTrue(Exit.isFailure(configured))

        // The right password: a lock cycle (spans), then the server dies under a held lock (logs, LockLost).
        const cycle = Effect.gen(function* () {
          const lock = yield* Lock.Lock
          yield* lock.withLock("k", { waitTimeout: "2 seconds" })(Effect.void)
          yield* lock
            .withLock("k", { waitTimeout: "2 seconds" })(Effect.andThen(server.kill, Effect.sleep("1500 millis")))
            .pipe(Effect.ignore)
        }).pipe(
          Effect.provide(
            Lock.layer({ leaseDuration: "600 millis" }).pipe(
              Layer.provide(NodeRedisBackend.layer({ url: `redis://locker:${encodedSecret}@127.0.0.1:${server.port}` }))
            )
          )
        )
        const right = yield* checkRun("right password", cycle)
        assert.isTrue(Exit.isSuccess(right), String(right))
      })
    )
  }
})
