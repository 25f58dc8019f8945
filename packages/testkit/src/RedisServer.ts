/**
 * A real server of one flavor (Redis 7 or 8.0, Valkey 8 or 9.1) for one test scope, started from a
 * local binary on 127.0.0.1, on a random free port in 10000–22767, in a fresh temp directory, without
 * persistence and with DEBUG enabled for local clients. Closing the scope kills the process (resuming
 * it first if paused), waits for it to exit and removes the directory. Process-level faults (pause,
 * kill, restart on the same port) and admin commands are Effects on the returned value.
 *
 * With `SAGE_TEST_DOCKER=1` (or `docker: true`) the server runs in a container instead; see Docker.ts
 * for what that mode supports.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Docker from "./Docker.ts"
import type * as Shape from "./internal/serverShape.ts"
import * as Client from "./internal/client.ts"
import * as Launch from "./internal/launch.ts"
import { trackDir, untrackDir } from "./internal/processes.ts"
import * as Tls from "./internal/tls.ts"
import * as ServerBinary from "./ServerBinary.ts"
import { TestkitError } from "./TestkitError.ts"

/** A decoded RESP2 reply: string, integer, nil or an array of those. */
export type Reply = Client.Reply

/** Options of `start`. Defaults: flavor "redis7", a random port, 10 s start timeout, 5 s command timeout. */
export interface StartOptions {
  readonly flavor?: ServerBinary.Flavor | undefined
  /** Extra server arguments appended after the kit's own flags (later flags win). */
  readonly args?: ReadonlyArray<string> | undefined
  /** A fixed port instead of a random one; no retry with another port if it is taken. */
  readonly port?: number | undefined
  readonly startTimeoutMs?: number | undefined
  readonly commandTimeoutMs?: number | undefined
  /** Run in a container (testcontainers); defaults to `SAGE_TEST_DOCKER === "1"`. */
  readonly docker?: boolean | undefined
  /**
   * Run as a Sentinel (`<dir>/sentinel.conf --sentinel` before the usual flags). The config file starts
   * empty and survives `restart`, since Sentinel rewrites it with what it learned (monitored masters,
   * its id, epochs). Always a local binary: Docker mode is ignored. Default false.
   */
  readonly sentinel?: boolean | undefined
  /**
   * TLS only: the server listens with `--tls-port` on the chosen port and `--port 0` (no plain TCP),
   * with a CA and server certificate generated for this server by `openssl` in its temp directory
   * (`tls-auth-clients no`: clients verify the server, not the reverse). `url` is then `rediss://`,
   * the admin commands use TLS, and `tls.ca` is the CA for clients. Local binaries only. Default false.
   * Given certificates (from `makeCertificates`) instead of `true`, the server uses those: the nodes
   * of a topology share one CA, so each trusts the others. A TLS server also replicates over TLS
   * (`tls-replication yes`, which a Sentinel uses for every connection it opens), and a cluster node
   * talks TLS on its bus (`tls-cluster yes`).
   */
  readonly tls?: boolean | TlsCertificates | undefined
}

/** A TLS server's certificates: the PEM files in its temp directory and the CA's PEM text. */
export type TlsCertificates = Tls.Certificates

/**
 * A CA and a server certificate for 127.0.0.1 and localhost, in a temp directory removed with the
 * scope: pass them as `tls` to every node of a topology (see `Replicated`, `SentinelTopology`,
 * `ClusterTopology`).
 */
export const makeCertificates: Effect.Effect<TlsCertificates, TestkitError, Scope.Scope> = Effect.flatMap(
  Effect.suspend(() => makeTempDir),
  (dir) => generateCertificates(dir)
)

const generateCertificates = (dir: string): Effect.Effect<TlsCertificates, TestkitError> =>
  Effect.try({
    try: () => Tls.generate(dir),
    catch: (cause) =>
      new TestkitError({
        reason: "StartFailed",
        message: `cannot make TLS certificates (is openssl installed?): ${String(cause)}`,
        cause
      })
  })

/** A host and port, shaped like node-redis `sentinelRootNodes` entries and cluster root-node sockets. */
export interface Address {
  readonly host: string
  readonly port: number
}

/** Per-call options of `commandWith`: user, password, timeout, error replies as values. */
export type CommandOptions = Client.CommandOptions

/** A running server owned by a scope (its shape lives beside the other modules that return one). */
export type RedisServer = Shape.RedisServer

const host = "127.0.0.1"
const maxPortAttempts = 20
const killTimeoutMs = 5000

/** The flags every server gets before the caller's arguments (port, dir and logfile excluded). */
// prettier-ignore
export const baseArgs: ReadonlyArray<string> = [
  "--bind", host,
  "--protected-mode", "no",
  "--save", "",
  "--appendonly", "no",
  "--enable-debug-command", "local",
  "--repl-diskless-sync-delay", "0",
  "--daemonize", "no"
]

interface State {
  current: Launch.Running | undefined
  paused: boolean
}

const stopCurrent = (state: State): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    const current = state.current
    state.paused = false
    return current === undefined ? true : Launch.killAndWait(current, killTimeoutMs)
  })

const makeTempDir = Effect.acquireRelease(
  Effect.try({
    try: () => {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "sage-lock-server-"))
      trackDir(dir)
      return dir
    },
    catch: (cause) => new TestkitError({ reason: "StartFailed", message: `mkdtemp failed: ${String(cause)}`, cause })
  }),
  (dir) =>
    Effect.sync(() => {
      Fs.rmSync(dir, { recursive: true, force: true })
      untrackDir(dir)
    })
)

const launchOnce = Effect.fnUntraced(function* (
  state: State,
  bin: string,
  argv: ReadonlyArray<string>,
  port: number,
  dir: string,
  timeoutMs: number,
  tls: { readonly ca: string } | undefined
) {
  const offsets = Launch.logOffsets(dir)
  // Spawn and record in one step: the scope's finalizer must see every child, even under interruption.
  const running = yield* Effect.try({
    try: () => {
      const spawned = Launch.spawnServer(bin, argv, dir)
      state.current = spawned
      state.paused = false
      return spawned
    },
    catch: (cause) =>
      new TestkitError({ reason: "StartFailed", message: `spawn ${bin} failed: ${String(cause)}`, cause })
  })
  const readiness = yield* Effect.promise((signal) =>
    Launch.waitReady(running, host, port, dir, timeoutMs, signal, offsets, tls)
  )
  if (readiness._tag !== "Ready") yield* stopCurrent(state)
  return readiness
})

const startFailed = (flavor: ServerBinary.Flavor, port: number, dir: string, detail: string): TestkitError =>
  new TestkitError({
    reason: "StartFailed",
    message: `${flavor} on 127.0.0.1:${port} did not start: ${detail}\n${Launch.readLogTail(dir, 30)}`
  })

/**
 * Starts a server scoped to the current `Scope` and waits until it answers. A random port that turns
 * out to be taken is retried with another one (up to 20 times).
 */
export const start = (options?: StartOptions): Effect.Effect<RedisServer, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const flavor = options?.flavor ?? "redis7"
    const extra = options?.args ?? []
    const commandTimeoutMs = options?.commandTimeoutMs ?? 5000
    const startTimeoutMs = options?.startTimeoutMs ?? 10_000
    const sentinel = options?.sentinel === true
    const useTls = options?.tls !== undefined && options.tls !== false
    if (!sentinel && !useTls && (options?.docker ?? process.env["SAGE_TEST_DOCKER"] === "1")) {
      return yield* Docker.start({ flavor, args: [...baseArgs, ...extra], commandTimeoutMs, startTimeoutMs })
    }
    const bin = yield* ServerBinary.resolve(flavor)
    const dir = yield* makeTempDir
    const state: State = { current: undefined, paused: false }
    // Registered before the first spawn (and after the directory), so the process dies first and
    // every process this scope ever spawns is covered, whatever fails later.
    yield* Effect.addFinalizer(() => stopCurrent(state))

    const certificates =
      options?.tls === undefined || options.tls === false
        ? undefined
        : options.tls === true
          ? yield* generateCertificates(dir)
          : options.tls
    // prettier-ignore
    const tlsArgs = (port: number): ReadonlyArray<string> =>
      certificates === undefined
        ? ["--port", String(port)]
        : [
            "--port", "0",
            "--tls-port", String(port),
            "--tls-cert-file", certificates.certFile,
            "--tls-key-file", certificates.keyFile,
            "--tls-ca-cert-file", certificates.caFile,
            "--tls-auth-clients", "no",
            "--tls-replication", "yes",
            ...(clusterBus ? ["--tls-cluster", "yes"] : [])
          ]

    const sentinelConfig = Path.join(dir, "sentinel.conf")
    if (sentinel) {
      yield* Effect.try({
        try: () => Fs.writeFileSync(sentinelConfig, ""),
        catch: (cause) =>
          new TestkitError({
            reason: "StartFailed",
            message: `cannot write ${sentinelConfig}: ${String(cause)}`,
            cause
          })
      })
    }
    // A cluster node also binds port+10000 (the bus): a random port is only tried when both are free.
    const clusterBus = extra.some((arg, i) => arg === "--cluster-enabled" && extra[i + 1] === "yes")
    const isFree = (port: number): Promise<boolean> =>
      clusterBus
        ? Promise.all([Launch.isPortFree(port), Launch.isPortFree(port + 10000)]).then(([a, b]) => a && b)
        : Launch.isPortFree(port)

    // prettier-ignore
    const argvFor = (port: number): ReadonlyArray<string> => [
      ...(sentinel ? [sentinelConfig, "--sentinel"] : []),
      ...tlsArgs(port),
      ...baseArgs,
      "--dir", dir,
      "--logfile", Launch.logFiles(dir).server,
      ...extra
    ]

    // Random ports: skip ones that cannot be bound now, and retry when the server still loses the race.
    const finalPort = yield* Effect.gen(function* () {
      let launches = 0
      for (let draws = 0; draws < maxPortAttempts * 10; draws++) {
        const port = options?.port ?? Launch.randomPort()
        if (options?.port === undefined && !(yield* Effect.promise(() => isFree(port)))) continue
        launches++
        const readiness = yield* launchOnce(state, bin, argvFor(port), port, dir, startTimeoutMs, certificates)
        if (readiness._tag === "Ready") return port
        if (readiness._tag === "Failed") return yield* startFailed(flavor, port, dir, readiness.detail)
        if (options?.port !== undefined || launches >= maxPortAttempts) {
          return yield* startFailed(flavor, port, dir, "Address already in use")
        }
      }
      return yield* startFailed(flavor, 0, dir, `no free port found in ${Launch.portMin}-${Launch.portMax}`)
    })

    const requireRunning = (what: string): Effect.Effect<Launch.Running, TestkitError> =>
      Effect.suspend(() => {
        const current = state.current
        return current !== undefined && current.exit === undefined
          ? Effect.succeed(current)
          : Effect.fail(
              new TestkitError({
                reason: "ProcessFailed",
                message: `cannot ${what}: ${flavor}:${finalPort} is not running`
              })
            )
      })

    const signal = (what: string, sig: NodeJS.Signals, paused: boolean): Effect.Effect<void, TestkitError> =>
      Effect.flatMap(requireRunning(what), (current) =>
        Effect.try({
          try: () => {
            current.child.kill(sig)
            state.paused = paused
          },
          catch: (cause) =>
            new TestkitError({ reason: "ProcessFailed", message: `${sig} to ${current.child.pid} failed`, cause })
        })
      )

    const kill: Effect.Effect<void, TestkitError> = Effect.flatMap(stopCurrent(state), (exited) =>
      exited
        ? Effect.void
        : Effect.fail(
            new TestkitError({
              reason: "ProcessFailed",
              message: `${flavor}:${finalPort} did not exit within ${killTimeoutMs} ms of SIGKILL`
            })
          )
    )

    const restart: Effect.Effect<void, TestkitError> = Effect.gen(function* () {
      yield* kill
      // The old listener is gone once the process is reaped, but allow a few tries for slow teardown.
      for (let attempt = 1; ; attempt++) {
        const readiness = yield* launchOnce(
          state,
          bin,
          argvFor(finalPort),
          finalPort,
          dir,
          startTimeoutMs,
          certificates
        )
        if (readiness._tag === "Ready") return
        if (readiness._tag !== "AddressInUse" || attempt >= 20) {
          return yield* startFailed(
            flavor,
            finalPort,
            dir,
            `restart: ${readiness._tag === "Failed" ? readiness.detail : "port still taken"}`
          )
        }
        yield* Effect.sleep(100)
      }
    })

    const server: RedisServer = {
      flavor,
      host,
      port: finalPort,
      url: `${certificates === undefined ? "redis" : "rediss"}://${host}:${finalPort}`,
      tls: certificates,
      dir,
      args: extra,
      get pid() {
        return state.current?.child.pid ?? -1
      },
      get running() {
        return state.current !== undefined && state.current.exit === undefined
      },
      get paused() {
        return state.paused
      },
      logTail: (lines = 40) => Effect.sync(() => Launch.readLogTail(dir, lines)),
      pause: signal("pause", "SIGSTOP", true),
      resume: signal("resume", "SIGCONT", false),
      kill,
      restart,
      ...Client.makeCommands({ host, port: finalPort, tls: certificates }, commandTimeoutMs)
    }
    return server
  })
