// The lock commands: `inspect`, `list` and `release --force`, over `LockAdmin`.
import * as Effect from "effect/Effect"
import { Argument, Command, Flag } from "effect/cli"
import { LockAdmin } from "@sage/lock-node-redis"
import { connectionFlags, json } from "./flags.ts"
import * as Output from "./output.ts"
import { checkNamespace, fail, printed, serverKey, show, withAdmin } from "./withAdmin.ts"

const keyArgument = Argument.String("key").pipe(
  Argument.withDescription("The lock's key as the application passes it to withLock (the key codec's text)")
)

export const inspect = Command.make("inspect", { key: keyArgument, json, ...connectionFlags }, (input) =>
  printed(
    Effect.gen(function* () {
      const redisKey = yield* serverKey(input.namespace, input.key)
      const info = yield* withAdmin(input, (client, timeoutMillis) =>
        LockAdmin.inspect(client, redisKey, { timeoutMillis })
      )
      const report = Output.report(input.namespace, info, input.key)
      yield* show(input.json, report, Output.inspectText)
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

export const list = Command.make("list", { json, ...connectionFlags }, (input) =>
  printed(
    Effect.gen(function* () {
      yield* checkNamespace(input.namespace)
      const locks = yield* withAdmin(input, (client, timeoutMillis) =>
        LockAdmin.list(client, input.namespace, { timeoutMillis })
      )
      const reports = locks.map((info) => Output.report(input.namespace, info))
      yield* show(input.json, reports, (all) => Output.listText(input.namespace, all))
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

export const release = Command.make(
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
        const redisKey = yield* serverKey(input.namespace, input.key)
        const released = yield* withAdmin(input, (client, timeoutMillis) =>
          LockAdmin.forceRelease(client, redisKey, { force: true, timeoutMillis })
        )
        yield* show(input.json, { key: input.key, redisKey, released }, () =>
          Output.releaseText(input.key, redisKey, released)
        )
      })
    )
).pipe(
  Command.withDescription("Force a lock free whoever holds it (needs --force); the fencing token keeps counting up"),
  Command.withExamples([
    { command: "sage-lock release invoice:42 --namespace billing --force", description: "Free a dead holder's lock" }
  ])
)
