/**
 * The one error a `sage-lock` command fails with: bad input, a refused connection, a server error,
 * or a forced release asked for without `--force`. Its message is what the user reads and never
 * carries a password.
 *
 * The command prints the message to standard error itself (`sage-lock: <message>`), so the error is
 * marked as reported: `NodeRuntime.runMain` sets exit code 1 without logging it (no stack trace).
 *
 * @since 0.2.0
 */
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"

/**
 * A command that could not do what it was asked, with the reason as the user should read it.
 *
 * **Details**
 *
 * `message` is already redacted: passwords from `--url` or the environment are replaced by `***`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Cli, CommandFailed } from "@sage/lock-cli"
 *
 * const program = Cli.run(["release", "job:1"]).pipe(
 *   Effect.catchTag("CommandFailed", (error: CommandFailed.CommandFailed) => Effect.log(error.message))
 * )
 * ```
 *
 * @category errors
 * @since 0.2.0
 */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", {
  message: Schema.String
}) {
  // Printed by the command before failing: the runtime must not print it again with a stack.
  override readonly [Runtime.errorReported] = false
}
