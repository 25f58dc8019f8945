// Running one `sage-lock` command against the servers: checking its key and namespace, connecting as
// its flags say, and turning every failure into one printed `CommandFailed` line with the passwords
// taken out.
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { LockScripts } from "@sage/lock"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import type { LockAdmin } from "@sage/lock-node-redis"
import { CommandFailed } from "../CommandFailed.ts"
import * as Connection from "./connection.ts"
import type { Flags } from "./flags.ts"

/** A command's failure with `message` (printed by `printed`). */
export const fail = (message: string) => Effect.fail(new CommandFailed({ message }))

/** `--namespace` must be non-empty and brace-free: it becomes part of a hash-tagged key. */
export const checkNamespace = (namespace: string) =>
  namespace.length === 0 || /[{}]/.test(namespace)
    ? fail(`--namespace must be non-empty and contain no braces`)
    : Effect.void

/** A key or an election name must not be empty. */
export const checkKey = (key: string) => (key.length === 0 ? fail("the key must not be empty") : Effect.void)

/** The key's name on the servers (`<namespace>:{<key>}`), once the namespace and the key pass their checks. */
export const serverKey = (namespace: string, key: string): Effect.Effect<string, CommandFailed> =>
  Effect.andThen(checkNamespace(namespace), Effect.as(checkKey(key), LockScripts.lockKey(namespace, key)))

/** Prints `report` on standard output: one line of JSON with `--json`, else `text` of it. */
export const show = <R>(json: boolean, report: R, text: (report: R) => string): Effect.Effect<void> =>
  Console.log(json ? JSON.stringify(report) : text(report))

/**
 * Runs `use` with a client connected as the flags say, closed afterwards. Every failure becomes a
 * `CommandFailed` naming the target, with the passwords taken out.
 */
export const withAdmin = <A>(
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
export const printed = <A>(effect: Effect.Effect<A, CommandFailed>): Effect.Effect<A, CommandFailed> =>
  effect.pipe(
    Effect.catchDefect((defect) => fail(`unexpected failure: ${Connection.reasonOf(defect)}`)),
    Effect.tapError((error) => Console.error(`sage-lock: ${error.message}`))
  )
