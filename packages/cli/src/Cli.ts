/**
 * `sage-lock`, the operator's command line over `LockAdmin`, `SemaphoreAdmin` and `Election`:
 * - `inspect <key>` (held, remaining TTL, last fencing token, waiters), `list` (every lock of a
 *   namespace, by `SCAN` on every master) and `release <key> --force` (forcing a dead holder's lock
 *   free);
 * - the same three under `semaphore` for semaphores and read-write locks (holders with their permits,
 *   the line, `release <key> --holder <token> --force`);
 * - `leader <name>` (who leads an election, in which term, since when, with what value) and
 *   `watch <name>` (that, then every change as it happens).
 *
 * Each runs on a standalone server (`--url`), a Sentinel-managed master
 * (`--sentinel host:port,... --master <name>`) or a Cluster (`--cluster host:port,...`).
 *
 * What it does not do: take or renew locks, campaign, or wake waiters. TLS: `--tls` (with `--ca`)
 * for every connection, sentinels and cluster nodes included, or a `rediss://` URL for a standalone
 * server. Passwords come from the URL or the `SAGE_LOCK_PASSWORD` environment variable and never
 * appear in output or errors. Every connection and command is bounded by `--timeout` (default 5
 * seconds). Failures print one line to standard error and exit with status 1.
 *
 * @since 0.2.0
 */
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { Argument, CliConfig, type CliError, CliOutput, Command, Flag, GlobalFlag } from "effect/cli"
import * as Stream from "effect/Stream"
import { Election, LockScripts } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { LockAdmin, NodeRedisBackend, SemaphoreAdmin } from "@sage/lock-node-redis"
import { CommandFailed } from "./CommandFailed.ts"
import * as Connection from "./internal/connection.ts"
import * as ElectionOutput from "./internal/electionOutput.ts"
import * as Output from "./internal/output.ts"

/**
 * The version `sage-lock --version` prints (the package's version).
 *
 * @category models
 * @since 0.2.0
 */
export const version: string = "0.2.0"

const connectionFlags = {
  url: Flag.String("url").pipe(
    Flag.withDescription(
      `A standalone server: redis://[user:password@]host:port[/db] or rediss:// (default ${Connection.defaultUrl})`
    ),
    Flag.optional
  ),
  sentinel: Flag.String("sentinel").pipe(
    Flag.withDescription("Sentinels to ask for the master: host:port[,host:port...] (with --master)"),
    Flag.optional
  ),
  master: Flag.String("master").pipe(
    Flag.withDescription("The master name the sentinels monitor (with --sentinel)"),
    Flag.optional
  ),
  cluster: Flag.String("cluster").pipe(
    Flag.withDescription("Cluster nodes to start from: host:port[,host:port...]"),
    Flag.optional
  ),
  user: Flag.String("user").pipe(
    Flag.withDescription(
      `ACL user name (a user in --url wins); the password comes from --url or ${Connection.passwordVariable}`
    ),
    Flag.optional
  ),
  tls: Flag.Boolean("tls").pipe(
    Flag.withDescription("TLS to every server and sentinel (a rediss:// --url turns it on for that server)"),
    Flag.withDefault(false)
  ),
  ca: Flag.String("ca").pipe(
    Flag.withDescription("A PEM file with the CA that signed the servers' certificates (with TLS)"),
    Flag.optional
  ),
  namespace: Flag.String("namespace").pipe(
    Flag.withDescription('The lock namespace (Lock.make\'s `namespace`; default "lock")'),
    Flag.withDefault("lock")
  ),
  timeout: Flag.Finite("timeout").pipe(
    Flag.withDescription("Seconds to wait for a connection or a reply (default 5)"),
    Flag.withDefault(5)
  )
}

const json = Flag.Boolean("json").pipe(
  Flag.withDescription("Print one line of JSON (for scripts)"),
  Flag.withDefault(false)
)

const keyArgument = Argument.String("key").pipe(
  Argument.withDescription("The lock's key as the application passes it to withLock (the key codec's text)")
)

type Flags = Connection.ConnectionFlags & { readonly namespace: string }

const fail = (message: string) => Effect.fail(new CommandFailed({ message }))

const checkNamespace = (namespace: string) =>
  namespace.length === 0 || /[{}]/.test(namespace)
    ? fail(`--namespace must be non-empty and contain no braces`)
    : Effect.void

const checkKey = (key: string) => (key.length === 0 ? fail("the key must not be empty") : Effect.void)

/**
 * Runs `use` with a client connected as the flags say, closed afterwards. Every failure becomes a
 * `CommandFailed` naming the target, with the passwords taken out.
 */
const withAdmin = <A>(
  flags: Flags,
  use: (
    client: LockAdmin.Client,
    timeoutMillis: number,
    connection: Connection.Connection
  ) => Effect.Effect<A, LockRedisError | InvalidArgument, Scope.Scope>
): Effect.Effect<A, CommandFailed> =>
  Effect.flatMap(Connection.fromFlags(flags), (connection) => {
    const secrets = Connection.secretsOf(connection)
    const failed = (reason: string) =>
      new CommandFailed({ message: Connection.redact(`${connection.description}: ${reason}`, secrets) })
    return Effect.scoped(
      Effect.flatMap(Connection.connect(connection), (client) => use(client, connection.timeoutMillis, connection))
    ).pipe(
      Effect.mapError((error) => (error instanceof CommandFailed ? error : failed(error.message))),
      Effect.catchDefect((defect) => Effect.fail(failed(`unexpected failure: ${Connection.reasonOf(defect)}`)))
    )
  })

/** Prints a failure as one line on standard error; the error is marked as reported (no stack trace). */
const printed = <A>(effect: Effect.Effect<A, CommandFailed>): Effect.Effect<A, CommandFailed> =>
  effect.pipe(
    Effect.catchDefect((defect) => fail(`unexpected failure: ${Connection.reasonOf(defect)}`)),
    Effect.tapError((error) => Console.error(`sage-lock: ${error.message}`))
  )

const inspect = Command.make("inspect", { key: keyArgument, json, ...connectionFlags }, (input) =>
  printed(
    Effect.gen(function* () {
      yield* checkNamespace(input.namespace)
      yield* checkKey(input.key)
      const redisKey = LockScripts.lockKey(input.namespace, input.key)
      const info = yield* withAdmin(input, (client, timeoutMillis) =>
        LockAdmin.inspect(client, redisKey, { timeoutMillis })
      )
      const report = Output.report(input.namespace, info, input.key)
      yield* Console.log(input.json ? JSON.stringify(report) : Output.inspectText(report))
    })
  )
).pipe(
  Command.withDescription("Show whether a lock is held, its remaining TTL, last fencing token and waiters"),
  Command.withExamples([
    { command: "sage-lock inspect invoice:42 --namespace billing", description: "One lock on redis://127.0.0.1:6379" },
    {
      command: "sage-lock inspect job:1 --sentinel 10.0.0.5:26379,10.0.0.6:26379 --master mymaster --json",
      description: "Through Sentinel, as JSON"
    }
  ])
)

const list = Command.make("list", { json, ...connectionFlags }, (input) =>
  printed(
    Effect.gen(function* () {
      yield* checkNamespace(input.namespace)
      const locks = yield* withAdmin(input, (client, timeoutMillis) =>
        LockAdmin.list(client, input.namespace, { timeoutMillis })
      )
      const reports = locks.map((info) => Output.report(input.namespace, info))
      yield* Console.log(input.json ? JSON.stringify(reports) : Output.listText(input.namespace, reports))
    })
  )
).pipe(
  Command.withDescription(
    "List the locks of a namespace the servers know (held, or free with a kept fencing token or waiters), by SCAN on every master"
  ),
  Command.withExamples([
    { command: "sage-lock list --cluster 10.0.0.7:7000 --namespace billing --json", description: "A Cluster, as JSON" }
  ])
)

const release = Command.make(
  "release",
  {
    key: keyArgument,
    force: Flag.Boolean("force").pipe(
      Flag.withDescription(
        "Required: confirms that the holder may still be running when another client takes the lock"
      ),
      Flag.withDefault(false)
    ),
    json,
    ...connectionFlags
  },
  (input) =>
    printed(
      Effect.gen(function* () {
        if (!input.force) {
          return yield* fail(
            `refusing to release "${input.key}" without --force: a holder that is still alive keeps running ` +
              "until its next renewal while another client may take the lock. Pass --force only for a holder " +
              "you know is dead (see docs/admin.md)"
          )
        }
        yield* checkNamespace(input.namespace)
        yield* checkKey(input.key)
        const redisKey = LockScripts.lockKey(input.namespace, input.key)
        const released = yield* withAdmin(input, (client, timeoutMillis) =>
          LockAdmin.forceRelease(client, redisKey, { force: true, timeoutMillis })
        )
        yield* Console.log(
          input.json
            ? JSON.stringify({ key: input.key, redisKey, released })
            : Output.releaseText(input.key, redisKey, released)
        )
      })
    )
).pipe(
  Command.withDescription("Force a lock free whoever holds it (needs --force); the fencing token keeps counting up"),
  Command.withExamples([
    { command: "sage-lock release invoice:42 --namespace billing --force", description: "Free a dead holder's lock" }
  ])
)

const semaphoreFlags = {
  ...connectionFlags,
  namespace: Flag.String("namespace").pipe(
    Flag.withDescription(
      'The semaphore namespace (Semaphore.make\'s `namespace`; default "semaphore", "rwlock" for read-write locks)'
    ),
    Flag.withDefault("semaphore")
  )
}

const semaphoreKeyArgument = Argument.String("key").pipe(
  Argument.withDescription("The semaphore's key as the application passes it to withPermits")
)

const semaphoreInspect = Command.make("inspect", { key: semaphoreKeyArgument, json, ...semaphoreFlags }, (input) =>
  printed(
    Effect.gen(function* () {
      yield* checkNamespace(input.namespace)
      yield* checkKey(input.key)
      const redisKey = LockScripts.lockKey(input.namespace, input.key)
      const info = yield* withAdmin(input, (client, timeoutMillis) =>
        SemaphoreAdmin.inspect(client, redisKey, { timeoutMillis })
      )
      const report = Output.semaphoreReport(input.namespace, info, input.key)
      yield* Console.log(input.json ? JSON.stringify(report) : Output.semaphoreText(report))
    })
  )
).pipe(
  Command.withDescription(
    "Show a semaphore's limit, its holders (permits, fencing token, TTL) and its waiters in line"
  ),
  Command.withExamples([
    { command: "sage-lock semaphore inspect orders --namespace partner-api", description: "One semaphore" },
    { command: "sage-lock semaphore inspect config --namespace rwlock", description: "A read-write lock" }
  ])
)

const semaphoreList = Command.make("list", { json, ...semaphoreFlags }, (input) =>
  printed(
    Effect.gen(function* () {
      yield* checkNamespace(input.namespace)
      const semaphores = yield* withAdmin(input, (client, timeoutMillis) =>
        SemaphoreAdmin.list(client, input.namespace, { timeoutMillis })
      )
      const reports = semaphores.map((info) => Output.semaphoreReport(input.namespace, info))
      yield* Console.log(input.json ? JSON.stringify(reports) : Output.semaphoreListText(input.namespace, reports))
    })
  )
).pipe(Command.withDescription("List the semaphores of a namespace the servers know, by SCAN on every master"))

const semaphoreRelease = Command.make(
  "release",
  {
    key: semaphoreKeyArgument,
    holder: Flag.String("holder").pipe(
      Flag.withDescription("The holder whose permits to release (its token, as `semaphore inspect` shows it)")
    ),
    force: Flag.Boolean("force").pipe(
      Flag.withDescription("Required: confirms that the holder may still be running when others get its permits"),
      Flag.withDefault(false)
    ),
    json,
    ...semaphoreFlags
  },
  (input) =>
    printed(
      Effect.gen(function* () {
        if (!input.force) {
          return yield* fail(
            `refusing to release ${input.holder}'s permits of "${input.key}" without --force: a holder that is ` +
              "still alive keeps running until its next renewal while others get its permits. Pass --force only " +
              "for a holder you know is dead (see docs/admin.md)"
          )
        }
        yield* checkNamespace(input.namespace)
        yield* checkKey(input.key)
        const redisKey = LockScripts.lockKey(input.namespace, input.key)
        const released = yield* withAdmin(input, (client, timeoutMillis) =>
          SemaphoreAdmin.forceRelease(client, redisKey, input.holder, { force: true, timeoutMillis })
        )
        yield* Console.log(
          input.json
            ? JSON.stringify({ key: input.key, redisKey, holder: input.holder, released })
            : Output.permitsReleaseText(input.key, input.holder, released)
        )
      })
    )
).pipe(
  Command.withDescription("Release one holder's permits (needs --force) and serve the line with them"),
  Command.withExamples([
    {
      command: "sage-lock semaphore release gpus --namespace pool --holder 4f0c...e1.2a --force",
      description: "Free a dead holder's permits"
    }
  ])
)

const semaphore = Command.make("semaphore").pipe(
  Command.withDescription("Inspect, list and release holders of semaphores and read-write locks"),
  Command.withSubcommands([semaphoreInspect, semaphoreList, semaphoreRelease])
)

const electionFlags = {
  ...connectionFlags,
  namespace: Flag.String("namespace").pipe(
    Flag.withDescription('The election namespace (Election.make\'s `namespace`; default "election")'),
    Flag.withDefault("election")
  )
}

const electionArgument = Argument.String("name").pipe(
  Argument.withDescription("The election's name as the application passes it to campaign")
)

/**
 * Runs `use` with an election client over the connection the flags describe (it never campaigns),
 * closed afterwards; failures as for `withAdmin`.
 */
const withElections = <A>(
  flags: Flags,
  use: (elections: Election.ElectionClient) => Effect.Effect<A, LockRedisError | InvalidArgument, Scope.Scope>
): Effect.Effect<A, CommandFailed> =>
  withAdmin(flags, (client, timeoutMillis, connection) =>
    Effect.gen(function* () {
      const backend = yield* Effect.suspend(() => {
        switch (connection.target._tag) {
          case "Sentinel":
            return NodeRedisBackend.fromSentinel(client as unknown as NodeRedisBackend.SharedSentinel)
          case "Cluster":
            return NodeRedisBackend.fromCluster(client as unknown as NodeRedisBackend.SharedCluster)
          default:
            return NodeRedisBackend.fromClient(client as unknown as NodeRedisBackend.SharedClient)
        }
      })
      const elections = yield* Election.make({
        namespace: flags.namespace,
        observeInterval: Math.max(100, Math.min(1_000, timeoutMillis))
      }).pipe(Effect.provideService(LockBackend, backend))
      return yield* use(elections)
    })
  )

const leader = Command.make("leader", { name: electionArgument, json, ...electionFlags }, (input) =>
  printed(
    Effect.gen(function* () {
      yield* checkNamespace(input.namespace)
      yield* checkKey(input.name)
      const state = yield* withElections(input, (elections) => elections.leader(input.name))
      const report = ElectionOutput.leaderReport(input.name, state)
      yield* Console.log(input.json ? JSON.stringify(report) : ElectionOutput.leaderText(report))
    })
  )
).pipe(
  Command.withDescription("Show who leads an election: term, candidate, since when, and what it proclaimed"),
  Command.withExamples([{ command: "sage-lock leader scheduler --namespace billing", description: "One election" }])
)

const watch = Command.make(
  "watch",
  {
    name: electionArgument,
    count: Flag.Int("count").pipe(
      Flag.withDescription("Stop after printing this many states (default: run until interrupted)"),
      Flag.optional
    ),
    json,
    ...electionFlags
  },
  (input) =>
    printed(
      Effect.gen(function* () {
        yield* checkNamespace(input.namespace)
        yield* checkKey(input.name)
        const count = input.count._tag === "Some" ? input.count.value : undefined
        if (count !== undefined && count < 1) return yield* fail("--count must be at least 1")
        yield* withElections(input, (elections) => {
          const states = elections.observe(input.name)
          return Stream.runForEach(count === undefined ? states : Stream.take(states, count), (state) => {
            const report = ElectionOutput.leaderReport(input.name, state)
            return Effect.flatMap(Clock.currentTimeMillis, (now) =>
              Console.log(input.json ? JSON.stringify(report) : ElectionOutput.watchText(report, new Date(now)))
            )
          })
        })
      })
    )
).pipe(
  Command.withDescription("Print who leads an election, then every change of leader as it happens, in term order"),
  Command.withExamples([
    { command: "sage-lock watch scheduler --namespace billing", description: "Until Ctrl-C" },
    { command: "sage-lock watch scheduler --count 2 --json", description: "The current leader and the next change" }
  ])
)

/**
 * The `sage-lock` command with its subcommands `inspect`, `list`, `release`, `semaphore`, `leader`
 * and `watch`.
 *
 * @category constructors
 * @since 0.2.0
 */
export const command: Command.Command<"sage-lock", {}, {}, CommandFailed, never> = Command.make("sage-lock").pipe(
  Command.withDescription(
    "Inspect, list and force-release @sage/lock locks and semaphores, and watch elections, on Redis or Valkey"
  ),
  Command.withSubcommands([inspect, list, release, semaphore, leader, watch])
)

// Credentials typed into a URL must not come back in a parse error. A password may hold `/`, `?`,
// `#`, `,`, `@` or a space, so a URL's credentials run to its last `@`: within a quoted argument
// (the parser quotes what it echoes), to the closing quote; unquoted, to a space or the next URL.
const hideUserinfo = (text: string): string =>
  text
    .replace(/"([a-z][a-z0-9+.-]*:\/\/)[^"]*@/gi, '"$1***@')
    .replace(/([a-z][a-z0-9+.-]*:\/\/)(?:(?![a-z][a-z0-9+.-]*:\/\/)[^\s"'`<>])*@/gi, "$1***@")

// Someone reaching for a password flag is told where passwords go instead (never a flag: flags show
// up in `ps`), and a value written as `--password=...` is not echoed.
const passwordFlag = /(--[a-z-]*pass(?:word)?)(=\S*)?/i
const explainPasswordFlag = (message: string): string => {
  const found = passwordFlag.exec(message)
  if (found === null || !/Unrecognized flag/i.test(message)) return message
  return (
    `${message.replace(passwordFlag, "$1")} (passwords are never flags, which \`ps\` shows: set ` +
    `${Connection.passwordVariable}, ${Connection.sentinelPasswordVariable} for the sentinels, or put it in --url)`
  )
}

// Bad invocations get the errors and a pointer to --help on standard error, not the whole help on
// standard output, where a script reading --json would take it for data.
const presenter: CliOutput.Presenter = {
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Console.error(
          [
            ...event.errors.map((error) => `sage-lock: ${explainPasswordFlag(hideUserinfo(error.message))}`),
            `Run "${event.commandPath.join(" ")} --help" for usage.`
          ].join("\n")
        )
      : CliOutput.defaultPresenter.present(event)
}

// --help and --version only: the wizard prompts (a script would hang on it) and completions are left out.
const settings = Layer.mergeAll(
  CliOutput.layerPresenter(presenter),
  CliConfig.layer({ builtIns: [GlobalFlag.Help, GlobalFlag.Version] })
)

/**
 * Runs `sage-lock` with the given arguments (without the program name): the in-process entry point
 * the `sage-lock` binary calls with `process.argv.slice(2)`.
 *
 * **Details**
 *
 * Output goes through `Console` (results on `log`, failures on `error`). Passwords are read with
 * `Config` (`SAGE_LOCK_PASSWORD`, `SAGE_LOCK_SENTINEL_PASSWORD`; the environment by default). Bad
 * input fails with a `CliError` (usage) or `CommandFailed`, both already printed and marked as
 * reported, so `NodeRuntime.runMain` exits with status 1 and prints nothing more.
 *
 * @example
 * ```ts
 * import { NodeRuntime, NodeServices } from "@effect/platform-node"
 * import { Effect } from "effect"
 * import { Cli } from "@sage/lock-cli"
 *
 * Cli.run(["list", "--namespace", "billing", "--json"]).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain)
 * ```
 *
 * @category running
 * @since 0.2.0
 */
export const run = (
  args: ReadonlyArray<string>
): Effect.Effect<void, CommandFailed | CliError.CliError, Command.Environment> =>
  Command.runWith(command, { version })(args).pipe(Effect.provide(settings))
