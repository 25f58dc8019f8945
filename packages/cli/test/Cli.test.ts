// sage-lock on one real server: the whole inspect / list / release scenario, credentials from the URL
// and from the environment (never printed), bad input refused with one line and exit status 1, and
// connections bounded by --timeout. One server for the file; each test has its own namespace.
import { assert, describe, it, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"
import * as Path from "node:path"
import { Lock, Semaphore } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer } from "@sage/lock-testkit"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import packageJson from "../package.json" with { type: "json" }
import { fails, inspectListRelease, leaderAndWatch, namespace, runCli, succeeds } from "./harness.ts"

class Server extends Context.Service<Server, RedisServer.RedisServer>()("@sage/lock-cli/test/Server") {}

const secret = "Cli-s3cret-PW"

const ServerLive = Layer.effect(
  Server,
  Effect.tap(RedisServer.start({ flavor: "redis7" }), (server) =>
    server.command("ACL", "SETUSER", "operator", "on", `>${secret}`, "~*", "&*", "+@all")
  )
)

/** A TCP port that accepts connections and never answers: a server that hangs. */
const silentPort = Effect.acquireRelease(
  Effect.callback<{ server: Net.Server; sockets: Set<Net.Socket> }>((resume) => {
    const sockets = new Set<Net.Socket>()
    const server = Net.createServer((socket) => void sockets.add(socket))
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, sockets })))
  }),
  ({ server, sockets }) =>
    Effect.callback<void>((resume) => {
      for (const socket of sockets) socket.destroy()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ server }) => (server.address() as Net.AddressInfo).port))

const bin = Path.join(import.meta.dirname, "..", "src", "bin.ts")

/** Runs the `sage-lock` executable in a node process (sources through the workspace condition). */
const spawnBin = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.callback<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = ChildProcess.execFile(
      process.execPath,
      ["--conditions=@sage/source", bin, ...args],
      { env: { PATH: process.env["PATH"] ?? "", ...env }, timeout: 30_000 },
      (_error, stdout, stderr) => resume(Effect.succeed({ code: child.exitCode, stdout, stderr }))
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

layer(ServerLive, { excludeTestServices: true })("sage-lock on a standalone server", (it) => {
  it.effect("inspects, lists, refuses to release without --force and releases with it", () =>
    Effect.gen(function* () {
      const server = yield* Server
      const backend = yield* NodeRedisBackend.make({ url: server.url })
      yield* inspectListRelease(["--url", server.url], backend)
    })
  )

  it.effect("semaphore inspect, list and release: holders with their permits, the line, --holder and --force", () =>
    Effect.gen(function* () {
      const server = yield* Server
      const ns = namespace("sem")
      const backend = yield* NodeRedisBackend.make({ url: server.url })
      const semaphores = yield* Semaphore.make({ namespace: ns, leaseDuration: "5 seconds" }).pipe(
        Effect.provideService(LockBackend, backend)
      )
      const url = ["--url", server.url, "--namespace", ns]
      const holder = yield* Effect.forkChild(
        semaphores.withPermits("gpus", { limit: 3, permits: 2, waitTimeout: "2 seconds" })(Effect.never)
      )
      const waiter = yield* Effect.forkChild(
        semaphores.withPermits("gpus", { limit: 3, permits: 2, waitTimeout: "10 seconds" })(Effect.succeed("served"))
      )
      yield* Effect.sleep("300 millis")
      const report = JSON.parse(yield* succeeds(["semaphore", "inspect", "gpus", "--json", ...url]))
      assert.strictEqual(report.key, "gpus")
      assert.strictEqual(report.limit, 3)
      assert.strictEqual(report.used, 2)
      assert.strictEqual(report.holders.length, 1)
      assert.strictEqual(report.holders[0].permits, 2)
      assert.deepStrictEqual(
        report.waiters.map((w: { permits: number }) => w.permits),
        [2]
      )
      const text = yield* succeeds(["semaphore", "inspect", "gpus", ...url])
      assert.include(text, "permits held:       2")
      assert.include(text, report.holders[0].token)
      const listed = yield* succeeds(["semaphore", "list", ...url])
      assert.include(listed, `1 semaphore in namespace "${ns}"`)

      const token: string = report.holders[0].token
      const refused = yield* fails(["semaphore", "release", "gpus", "--holder", token, ...url])
      assert.include(refused, "without --force")
      const released = yield* succeeds(["semaphore", "release", "gpus", "--holder", token, "--force", ...url])
      assert.include(released, "released")
      assert.strictEqual(yield* Fiber.join(waiter), "served", "the line got the released permits")
      yield* Fiber.interrupt(holder)
    })
  )

  it.effect("leader and watch: who leads, then each change in term order", () =>
    Effect.gen(function* () {
      const server = yield* Server
      const backend = yield* NodeRedisBackend.make({ url: server.url })
      yield* leaderAndWatch(["--url", server.url], backend)
    })
  )

  it.effect("lists nothing in an empty namespace, and finds a free lock", () =>
    Effect.gen(function* () {
      const server = yield* Server
      const ns = namespace("empty")
      assert.strictEqual(
        yield* succeeds(["list", "--url", server.url, "--namespace", ns]),
        `no locks in namespace "${ns}"`
      )
      assert.deepStrictEqual(
        JSON.parse(yield* succeeds(["list", "--json", "--url", server.url, "--namespace", ns])),
        []
      )
      const free = JSON.parse(yield* succeeds(["inspect", "nothing", "--json", "--url", server.url, "--namespace", ns]))
      assert.deepStrictEqual(free, {
        key: "nothing",
        redisKey: `${ns}:{nothing}`,
        held: false,
        remainingMillis: null,
        lastFencingToken: null,
        waiters: 0
      })
    })
  )

  it.effect("keys holding control characters are printed escaped: they cannot drive the terminal or split a row", () =>
    Effect.gen(function* () {
      const server = yield* Server
      const ns = namespace("ctl")
      const key = "job\u001b[31m\nred\u009b2J"
      const backend = yield* NodeRedisBackend.make({ url: server.url })
      const lock = yield* Lock.make({ namespace: ns, leaseDuration: "5 seconds" }).pipe(
        Effect.provideService(LockBackend, backend)
      )
      // Released at once; the fence key it leaves keeps the lock listed.
      yield* lock.withLock(key, { waitTimeout: "2 seconds" })(Effect.void)
      const listed = yield* succeeds(["list", "--url", server.url, "--namespace", ns])
      const inspected = yield* succeeds(["inspect", key, "--url", server.url, "--namespace", ns])
      for (const out of [listed, inspected]) {
        assert.notMatch(out.replaceAll("\n", ""), /\p{Cc}/u, "no control character but the lines' own")
        assert.include(out, "job\\u001b[31m\\nred\\u009b2J")
      }
      assert.lengthOf(listed.split("\n"), 3, "a header, one row and the count")
      const json = JSON.parse(yield* succeeds(["list", "--json", "--url", server.url, "--namespace", ns]))
      assert.strictEqual(json[0].key, key, "--json keeps the key exact")
    })
  )

  it.effect("takes the password from the URL or SAGE_LOCK_PASSWORD, and never prints it", () =>
    Effect.gen(function* () {
      const server = yield* Server
      const url = (password: string) => `redis://operator:${encodeURIComponent(password)}@127.0.0.1:${server.port}`
      yield* succeeds(["list", "--url", url(secret)])
      yield* succeeds(["list", "--url", server.url, "--user", "operator"], { SAGE_LOCK_PASSWORD: secret })
      const wrongUrl = yield* fails(["list", "--url", url(`${secret}x`)])
      const wrongEnv = yield* fails(["list", "--url", server.url, "--user", "operator"], {
        SAGE_LOCK_PASSWORD: `${secret}x`
      })
      for (const message of [wrongUrl, wrongEnv]) {
        assert.match(message, /WRONGPASS/)
        assert.notInclude(message, secret)
      }
      assert.include(wrongUrl, `redis://127.0.0.1:${server.port}`, "the target is named without its credentials")
    })
  )

  it.effect("the sage-lock executable: JSON on stdout and status 0, one line on stderr and status 1", () =>
    Effect.gen(function* () {
      const server = yield* Server
      const ns = namespace("bin")
      const backend = yield* NodeRedisBackend.make({ url: server.url })
      const lock = yield* Lock.make({ namespace: ns }).pipe(Effect.provideService(LockBackend, backend))
      yield* lock.withLock("report", { waitTimeout: "2 seconds" })(Effect.void)
      const flags = ["--url", server.url, "--user", "operator", "--namespace", ns]
      const [inspected, refused] = yield* Effect.all(
        [
          spawnBin(["inspect", "report", "--json", ...flags], { SAGE_LOCK_PASSWORD: secret }),
          spawnBin(["release", "report", ...flags])
        ],
        { concurrency: 2 }
      )
      assert.strictEqual(inspected.code, 0, inspected.stderr)
      assert.strictEqual(inspected.stderr, "")
      const report = JSON.parse(inspected.stdout)
      assert.strictEqual(report.held, false)
      assert.isAbove(report.lastFencingToken, 0)
      assert.strictEqual(refused.code, 1)
      assert.strictEqual(refused.stdout, "")
      assert.match(refused.stderr, /^sage-lock: refusing to release "report" without --force[^\n]*\n$/)
    })
  )
})

describe("sage-lock refuses bad input with one line and exit status 1", () => {
  it.live("unknown flags, bad addresses, a missing master name, several deployments, bad values", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
        [["list", "--bogus"], "Unrecognized flag: --bogus"],
        [["list", "--password", "hunter2"], "set SAGE_LOCK_PASSWORD"],
        [["list", "--sentinel-password=hunter2"], "SAGE_LOCK_SENTINEL_PASSWORD for the sentinels"],
        [["inspect"], "Missing required argument: key"],
        [["frobnicate"], "frobnicate"],
        [["list", "--timeout", "soon"], "--timeout"],
        [["list", "--sentinel", "10.0.0.5:26379"], "--sentinel needs --master"],
        [["list", "--master", "mymaster"], "it needs --sentinel"],
        [["list", "--sentinel", "10.0.0.5", "--master", "m"], `"10.0.0.5" is not host:port`],
        [["list", "--cluster", "10.0.0.7:99999"], "the port must be an integer from 1 to 65535"],
        [["list", "--cluster", ","], "expected host:port"],
        [["list", "--cluster", "a:1", "--url", "redis://b:2"], "not several"],
        [["list", "--url", "http://127.0.0.1:6379"], "must start with redis://"],
        [["list", "--timeout", "0"], "--timeout must be"],
        [["list", "--namespace", "a{b}"], "--namespace must be non-empty and contain no braces"],
        [["inspect", "", "--url", "redis://127.0.0.1:1"], "the key must not be empty"],
        [["list", "--user", " ", "--url", "redis://127.0.0.1:1"], "--user needs a user name"]
      ]
      for (const [args, expected] of cases) {
        const message = yield* fails(args)
        assert.include(message, expected, args.join(" "))
        assert.notInclude(message, "hunter2", "a password given as a flag is not echoed")
      }
    })
  )

  it.live("credentials typed into a bad URL or address are not echoed", () =>
    Effect.gen(function* () {
      for (const args of [
        ["list", "--url", `redis://operator:${secret}@127.0.0.1:notaport`],
        ["list", "--url", `redis://operator:${secret}@[::1:6379`],
        ["list", "--cluster", `operator:${secret}@10.0.0.7:7000`],
        ["list", "--sentinel", `operator:${secret}@10.0.0.5`, "--master", "m"],
        ["list", "--url", `redis://operator:${secret}@127.0.0.1:1`],
        // Written unencoded, a password's ?, # or / turns the rest into a query, fragment or path
        // (and its digits into a port): refused, not connected to a host read out of the password.
        ["list", "--url", `redis://operator:4242?${secret}@127.0.0.1:1`],
        ["list", "--url", `redis://operator:4242#${secret}@127.0.0.1:1`],
        ["list", "--url", `redis://operator:4242/${secret}@127.0.0.1:1`],
        // Echoed by the argument parser: the credentials run to the URL's last @ whatever they hold.
        ["list", `redis://:${secret}/x@127.0.0.1:1`],
        ["list", `redis://u:${secret} x@127.0.0.1:1`],
        ["list", `redis://u:${secret}@x@127.0.0.1:1`],
        ["list", "--timeout", `redis://:${secret}/x@h:1`]
      ]) {
        assert.notInclude(yield* fails(args), secret, args.join(" "))
      }
      const query = yield* fails(["list", "--url", `redis://127.0.0.1:1?${secret}@x`])
      assert.include(query, "may only name a database")
    })
  )

  it.live("Ctrl-C during a connect that never settles ends the command at once, not at --timeout", () =>
    Effect.gen(function* () {
      const port = yield* silentPort
      for (const args of [
        ["list", "--url", `redis://127.0.0.1:${port}`, "--timeout", "60"],
        ["list", "--sentinel", `127.0.0.1:${port}`, "--master", "m", "--timeout", "60"]
      ]) {
        const fiber = yield* Effect.forkChild(runCli(args))
        yield* Effect.sleep("300 millis")
        const started = Date.now()
        yield* Fiber.interrupt(fiber)
        // The client's close and destroy are each bounded at 2 s; --timeout is 60 s.
        assert.isBelow(Date.now() - started, 10_000, args.join(" "))
      }
    })
  )

  it.live("a sentinel that accepts and never answers: the command ends after --timeout", () =>
    Effect.gen(function* () {
      const port = yield* silentPort
      const started = Date.now()
      const message = yield* fails(["list", "--sentinel", `127.0.0.1:${port}`, "--master", "m", "--timeout", "1"])
      assert.include(message, "no connection within 1000 ms")
      // The connect's 1 s, then the client's close and destroy, each bounded at 2 s (destroy used to
      // wait forever here).
      assert.isBelow(Date.now() - started, 15_000)
    })
  )

  it.live("a refused connection fails at once, a server that never answers within --timeout", () =>
    Effect.gen(function* () {
      assert.include(yield* fails(["list", "--url", "redis://127.0.0.1:1"]), "ECONNREFUSED")
      const port = yield* silentPort
      const started = Date.now()
      const message = yield* fails(["list", "--url", `redis://127.0.0.1:${port}`, "--timeout", "0.5"])
      assert.include(message, "no connection within 500 ms (--timeout)")
      assert.isBelow(Date.now() - started, 3_000)
      const cluster = yield* fails(["list", "--cluster", `127.0.0.1:${port}`, "--timeout", "0.5"])
      assert.include(cluster, "no connection within 500 ms")
    })
  )

  it.live("a bracketed IPv6 --url reaches the server (node-redis alone looks `[::1]` up as a host name)", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: "redis7", args: ["--bind", "127.0.0.1 ::1"] })
      const ns = namespace("v6")
      assert.strictEqual(
        yield* succeeds(["list", "--url", `redis://[::1]:${server.port}/0`, "--namespace", ns]),
        `no locks in namespace "${ns}"`
      )
    })
  )

  it.live("--version prints the package's version", () =>
    Effect.map(succeeds(["--version"]), (out) => assert.strictEqual(out, `sage-lock v${packageJson.version}`))
  )
})

class TlsServer extends Context.Service<TlsServer, RedisServer.RedisServer>()("@sage/lock-cli/test/TlsServer") {}

layer(Layer.effect(TlsServer, RedisServer.start({ flavor: "redis7", tls: true })), { excludeTestServices: true })(
  "sage-lock over TLS (a TLS-only server, certificates made for the test)",
  (it) => {
    it.effect("rediss:// or --tls with --ca reaches the server; without the CA the certificate is refused", () =>
      Effect.gen(function* () {
        const server = yield* TlsServer
        const caFile = server.tls!.caFile
        const plain = `redis://127.0.0.1:${server.port}`
        const ns = namespace("tls")
        const free = { key: "job", redisKey: `${ns}:{job}`, held: false }
        for (const connection of [
          ["--url", server.url, "--ca", caFile],
          ["--url", plain, "--tls", "--ca", caFile]
        ]) {
          const out = yield* succeeds(["inspect", "job", "--json", "--namespace", ns, ...connection])
          assert.deepInclude(JSON.parse(out), free, connection.join(" "))
        }
        // The server's certificate is signed by the test's own CA, which the system does not trust.
        const untrusted = yield* fails(["inspect", "job", "--url", server.url, "--timeout", "2"])
        assert.include(untrusted, "cannot connect to")
        // A plain connection to a TLS-only port gets no answer it understands.
        yield* fails(["inspect", "job", "--url", plain, "--timeout", "1"])
      })
    )

    it.effect("--ca without TLS, an unreadable file or one with no certificate: one line, status 1", () =>
      Effect.gen(function* () {
        const server = yield* TlsServer
        const plain = `redis://127.0.0.1:${server.port}`
        assert.include(yield* fails(["list", "--url", plain, "--ca", server.tls!.caFile]), "add --tls")
        assert.include(yield* fails(["list", "--url", server.url, "--ca", "/nonexistent/ca.pem"]), "cannot read")
        assert.include(
          yield* fails(["list", "--url", server.url, "--ca", server.tls!.keyFile]),
          "holds no PEM certificate"
        )
      })
    )
  }
)
