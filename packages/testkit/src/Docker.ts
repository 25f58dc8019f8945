/**
 * Optional container mode for `RedisServer.start` (`SAGE_TEST_DOCKER=1` or `docker: true`): the server
 * runs as a `testcontainers` GenericContainer ("redis:7", "valkey/valkey:8", "redis:8.0" or
 * "valkey/valkey:9.1", port 6379 mapped to a random host port) with the kit's usual flags.
 *
 * `testcontainers` is an optional peer dependency of the kit, imported only in this mode; no Docker engine (or a
 * missing package) is a `TestkitError` (reason `DockerUnavailable`) that says so. Supported:
 * admin commands and `kill` (container stop). Not supported (fail with reason `Unsupported`): `pause`,
 * `resume`, `restart` (a restarted container may get another host port). `pid` is -1 and `dir` is "".
 * This path is not exercised on machines without a Docker engine; prefer local binaries.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { RedisServer } from "./internal/serverShape.ts"
import * as Client from "./internal/client.ts"
import type { Flavor } from "./ServerBinary.ts"
import { TestkitError } from "./TestkitError.ts"

const images: Record<Flavor, string> = {
  redis7: "redis:7",
  valkey8: "valkey/valkey:8",
  redis8: "redis:8.0",
  valkey9: "valkey/valkey:9.1"
}

/** The image used for a flavor. */
export const image = (flavor: Flavor): string => images[flavor]

/** What `start` needs from `RedisServer.start`. */
export interface DockerStartOptions {
  readonly flavor: Flavor
  readonly args: ReadonlyArray<string>
  readonly commandTimeoutMs: number
  readonly startTimeoutMs: number
}

interface StartedContainer {
  getHost(): string
  getMappedPort(port: number): number
  stop(options?: { readonly timeout?: number }): Promise<unknown>
}

interface ContainerBuilder {
  withExposedPorts(...ports: Array<number>): ContainerBuilder
  withCommand(command: Array<string>): ContainerBuilder
  withStartupTimeout(ms: number): ContainerBuilder
  start(): Promise<StartedContainer>
}

interface TestcontainersModule {
  readonly GenericContainer: new (image: string) => ContainerBuilder
  readonly getContainerRuntimeClient: () => Promise<unknown>
}

const isTestcontainers = (mod: unknown): mod is TestcontainersModule =>
  typeof mod === "object" &&
  mod !== null &&
  "GenericContainer" in mod &&
  typeof mod.GenericContainer === "function" &&
  "getContainerRuntimeClient" in mod &&
  typeof mod.getContainerRuntimeClient === "function"

const unavailable = (detail: string, cause?: unknown): TestkitError =>
  new TestkitError({
    reason: "DockerUnavailable",
    message:
      `SAGE_TEST_DOCKER=1 but ${detail}. Start a Docker engine (testcontainers looks at DOCKER_HOST, ` +
      "~/.testcontainers.properties and the default socket), or unset SAGE_TEST_DOCKER to use local binaries " +
      "(see ServerBinary).",
    ...(cause === undefined ? {} : { cause })
  })

// Imported on first use only: runs on local binaries never load testcontainers and its client stack.
const loadTestcontainers: Effect.Effect<TestcontainersModule, TestkitError> = Effect.tryPromise({
  try: () => import("testcontainers"),
  catch: (cause) => unavailable("the npm package testcontainers cannot be loaded (run `pnpm install`)", cause)
}).pipe(
  Effect.flatMap((mod: unknown) =>
    isTestcontainers(mod) ? Effect.succeed(mod) : Effect.fail(unavailable("testcontainers has no GenericContainer"))
  ),
  // Ask for the engine first, so "no Docker here" reads as that rather than as a failed container start.
  Effect.tap((testcontainers) =>
    Effect.tryPromise({
      try: () => testcontainers.getContainerRuntimeClient(),
      catch: (cause) => unavailable(`no Docker engine answered (${String(cause)})`, cause)
    })
  )
)

const unsupported = (what: string): Effect.Effect<never, TestkitError> =>
  Effect.fail(new TestkitError({ reason: "Unsupported", message: `${what} is not supported in Docker mode` }))

/** Starts a containerized server for the current scope (the container is stopped on scope close). */
export const start = (options: DockerStartOptions): Effect.Effect<RedisServer, TestkitError, Scope.Scope> =>
  Effect.gen(function* () {
    const testcontainers = yield* loadTestcontainers
    const executable = options.flavor === "redis7" || options.flavor === "redis8" ? "redis-server" : "valkey-server"
    // Inside the container the server must listen on every interface (the port is mapped), and DEBUG
    // arrives from the bridge, not from localhost: later flags override the kit's defaults.
    const command = [
      executable,
      "--port",
      "6379",
      ...options.args,
      "--bind",
      "0.0.0.0",
      "--enable-debug-command",
      "yes"
    ]
    const container = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          new testcontainers.GenericContainer(image(options.flavor))
            .withExposedPorts(6379)
            .withCommand(command)
            .withStartupTimeout(options.startTimeoutMs)
            .start(),
        catch: (cause) => unavailable(`the container ${image(options.flavor)} did not start (${String(cause)})`, cause)
      }),
      (started) => Effect.promise(() => started.stop({ timeout: 0 }).catch(() => undefined))
    )
    const host = container.getHost()
    const port = container.getMappedPort(6379)
    yield* Client.command({ host, port, timeoutMs: options.commandTimeoutMs }, ["PING"]).pipe(
      Effect.retry({ times: 50, schedule: Schedule.spaced(100) }),
      Effect.mapError((error) => unavailable(`the container does not answer PING: ${error.message}`, error))
    )
    let stopped = false
    const server: RedisServer = {
      flavor: options.flavor,
      host,
      port,
      url: `redis://${host}:${port}`,
      tls: undefined,
      dir: "",
      args: options.args,
      pid: -1,
      get running() {
        return !stopped
      },
      paused: false,
      logTail: () => Effect.succeed("(logs are not collected in Docker mode: use `docker logs`)"),
      pause: unsupported("pause"),
      resume: unsupported("resume"),
      kill: Effect.promise(() => container.stop({ timeout: 0 }).catch(() => undefined)).pipe(
        Effect.andThen(
          Effect.sync(() => {
            stopped = true
          })
        )
      ),
      restart: unsupported("restart"),
      ...Client.makeCommands({ host, port }, options.commandTimeoutMs)
    }
    return server
  })
