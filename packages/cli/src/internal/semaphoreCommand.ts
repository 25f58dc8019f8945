// The `semaphore` command group: `inspect`, `list` and `release --holder --force` for semaphores and
// read-write locks, over `SemaphoreAdmin`.
import * as Effect from "effect/Effect"
import { Argument, Command, Flag } from "effect/cli"
import { SemaphoreAdmin } from "@sage/lock-node-redis"
import { connectionFlags, json } from "./flags.ts"
import * as Output from "./output.ts"
import { checkNamespace, fail, printed, serverKey, show, withAdmin } from "./withAdmin.ts"

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
      const redisKey = yield* serverKey(input.namespace, input.key)
      const info = yield* withAdmin(input, (client, timeoutMillis) =>
        SemaphoreAdmin.inspect(client, redisKey, { timeoutMillis })
      )
      const report = Output.semaphoreReport(input.namespace, info, input.key)
      yield* show(input.json, report, Output.semaphoreText)
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
      yield* show(input.json, reports, (all) => Output.semaphoreListText(input.namespace, all))
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
        const redisKey = yield* serverKey(input.namespace, input.key)
        const released = yield* withAdmin(input, (client, timeoutMillis) =>
          SemaphoreAdmin.forceRelease(client, redisKey, input.holder, { force: true, timeoutMillis })
        )
        yield* show(input.json, { key: input.key, redisKey, holder: input.holder, released }, () =>
          Output.permitsReleaseText(input.key, input.holder, released)
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

export const semaphore = Command.make("semaphore").pipe(
  Command.withDescription("Inspect, list and release holders of semaphores and read-write locks"),
  Command.withSubcommands([semaphoreInspect, semaphoreList, semaphoreRelease])
)
