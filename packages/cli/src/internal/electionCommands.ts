// The election commands: `leader` and `watch`, over an `Election` client that never campaigns.
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Argument, Command, Flag } from "effect/cli"
import * as Stream from "effect/Stream"
import { Election } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import type { InvalidArgument, LockRedisError } from "@sage/lock/LockError"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import type { CommandFailed } from "../CommandFailed.ts"
import * as ElectionOutput from "./electionOutput.ts"
import { connectionFlags, type Flags, json } from "./flags.ts"
import { checkKey, checkNamespace, fail, printed, withAdmin } from "./withAdmin.ts"

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

export const leader = Command.make("leader", { name: electionArgument, json, ...electionFlags }, (input) =>
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

export const watch = Command.make(
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
