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
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { CliConfig, type CliError, CliOutput, Command, GlobalFlag } from "effect/cli"
import type { CommandFailed } from "./CommandFailed.ts"
import * as Connection from "./internal/connection.ts"
import { leader, watch } from "./internal/electionCommands.ts"
import { inspect, list, release } from "./internal/lockCommands.ts"
import { semaphore } from "./internal/semaphoreCommand.ts"

/**
 * The version `sage-lock --version` prints (the package's version).
 *
 * @category models
 * @since 0.2.0
 */
export const version: string = "0.2.0"

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
