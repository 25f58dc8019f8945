// Running `sage-lock` in-process as the binary does (Cli.run on Node's services) with its output
// captured, and the scenarios every deployment goes through: a lock held by the library is inspected,
// listed, refused a release without --force and forced free with it; an election's leader is shown
// and watched through a resignation.
import { NodeServices } from "@effect/platform-node"
import { assert } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { TestConsole } from "effect/testing"
import { Election, Lease, Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import * as Cli from "../src/Cli.ts"

/** What one run printed and how it ended. */
export interface Outcome {
  readonly ok: boolean
  readonly stdout: string
  readonly stderr: string
}

const lines = (all: ReadonlyArray<unknown>): string => all.map(String).join("\n")

/** Runs `sage-lock args` in-process, with `env` as the only environment variables it can read. */
export const runCli = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Effect.Effect<Outcome> =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(Cli.run(args))
    return {
      ok: Exit.isSuccess(exit),
      stdout: lines(yield* TestConsole.logLines),
      stderr: lines(yield* TestConsole.errorLines)
    }
  }).pipe(
    Effect.provide(
      Layer.mergeAll(TestConsole.layer, NodeServices.layer, ConfigProvider.layer(ConfigProvider.fromUnknown(env)))
    )
  )

/** Runs `sage-lock args` and fails the test unless it succeeded with nothing on standard error. */
export const succeeds = (args: ReadonlyArray<string>, env?: Record<string, string>) =>
  Effect.map(runCli(args, env), (outcome) => {
    assert.isTrue(outcome.ok, `sage-lock ${args.join(" ")} failed: ${outcome.stderr}`)
    assert.strictEqual(outcome.stderr, "")
    return outcome.stdout
  })

/** Runs `sage-lock args`, checks that it failed with one `sage-lock:` message and no output, and returns the message. */
export const fails = (args: ReadonlyArray<string>, env?: Record<string, string>) =>
  Effect.map(runCli(args, env), (outcome) => {
    assert.isFalse(outcome.ok, `sage-lock ${args.join(" ")} succeeded: ${outcome.stdout}`)
    assert.strictEqual(outcome.stdout, "", "nothing on standard output")
    assert.match(outcome.stderr, /^sage-lock: /)
    assert.notMatch(outcome.stderr, /\n\s+at /, "no stack trace")
    return outcome.stderr
  })

export const namespace = (prefix: string): string => `${prefix}-${Math.random().toString(36).slice(2, 8)}`

/**
 * The shared scenario over `connection` (the CLI's flags for the deployment `backend` is on): a lock
 * held in the background is inspected (text and JSON), listed with a released one, kept by a release
 * without --force, and freed by one with it; its holder then loses it.
 */
export const inspectListRelease = (connection: ReadonlyArray<string>, backend: LockBackend["Service"]) =>
  Effect.gen(function* () {
    const ns = namespace("cli")
    const flags = [...connection, "--namespace", ns]
    // A short lease: the holder's next renewal (a third of it) finds a forced release soon.
    const lock = yield* Lock.make({ namespace: ns, leaseDuration: "3 seconds" }).pipe(
      Effect.provideService(LockBackend, backend)
    )
    const inside = yield* Deferred.make<number>()
    const holder = yield* Lease.Lease.use((lease) =>
      Effect.andThen(Deferred.succeed(inside, lease.fencingToken), Effect.never)
    ).pipe(lock.withLock("job:1", { waitTimeout: "5 seconds" }), Effect.forkChild)
    const token = yield* Deferred.await(inside)
    yield* lock.withLock("job:{2}", { waitTimeout: "5 seconds" })(Effect.void)

    const text = yield* succeeds(["inspect", "job:1", ...flags])
    assert.match(text, /^held: +yes$/m)
    assert.match(text, new RegExp(`^last fencing token: +${token}$`, "m"))
    assert.match(text, new RegExp(`^redis key: +${ns}:\\{job:1\\}$`, "m"))
    const held = JSON.parse(yield* succeeds(["inspect", "job:1", "--json", ...flags]))
    assert.strictEqual(held.key, "job:1")
    assert.strictEqual(held.held, true)
    assert.isAbove(held.remainingMillis, 0)
    assert.isAtMost(held.remainingMillis, 3_000)
    assert.strictEqual(held.lastFencingToken, token)
    assert.strictEqual(held.waiters, 0)

    const listed = JSON.parse(yield* succeeds(["list", "--json", ...flags]))
    assert.deepStrictEqual(
      listed.map((lock: { key: string; held: boolean }) => [lock.key, lock.held]),
      [
        ["job:{2}", false],
        ["job:1", true]
      ],
      "the keys as the application wrote them, braces included, in Redis key order (%7B before :)"
    )
    const table = yield* succeeds(["list", ...flags])
    assert.match(table, /^job:1 +yes /m)
    assert.match(table, new RegExp(`2 locks in namespace "${ns}", 1 held$`))

    const refused = yield* fails(["release", "job:1", ...flags])
    assert.include(refused, "without --force")
    assert.isTrue(JSON.parse(yield* succeeds(["inspect", "job:1", "--json", ...flags])).held, "still held")

    const released = JSON.parse(yield* succeeds(["release", "job:1", "--force", "--json", ...flags]))
    assert.deepStrictEqual(released, { key: "job:1", redisKey: `${ns}:{job:1}`, released: true })
    const after = JSON.parse(yield* succeeds(["inspect", "job:1", "--json", ...flags]))
    assert.strictEqual(after.held, false)
    assert.strictEqual(after.lastFencingToken, token, "the fencing token is kept")
    assert.include(yield* succeeds(["release", "job:1", "--force", ...flags]), "was not held")
    const lost = yield* Fiber.join(holder).pipe(Effect.flip)
    assert.strictEqual(lost._tag, "LockLost", "the holder finds the key gone at its next renewal")
  })

/**
 * The election scenario every deployment goes through: `leader` before and while a campaign leads,
 * and `watch` printing the leader and then, after it resigns, that nobody leads.
 */
export const leaderAndWatch = (connection: ReadonlyArray<string>, backend: LockBackend["Service"]) =>
  Effect.gen(function* () {
    const ns = namespace("elect")
    const elections = yield* Election.make({ namespace: ns, candidate: "worker-1" }).pipe(
      Effect.provideService(LockBackend, backend)
    )
    const url = [...connection, "--namespace", ns]
    assert.strictEqual(yield* succeeds(["leader", "cron", ...url]), "cron: nobody leads")
    const resign = yield* Deferred.make<void>()
    const leading = yield* Deferred.make<number>()
    const leader = yield* Effect.forkChild(
      Effect.scoped(
        Effect.gen(function* () {
          const leadership = yield* elections.campaign("cron", { value: "10.0.0.7:8080" })
          yield* Deferred.succeed(leading, leadership.term)
          yield* Deferred.await(resign)
          yield* leadership.resign
        })
      )
    )
    const term = yield* Deferred.await(leading)
    const report = JSON.parse(yield* succeeds(["leader", "cron", "--json", ...url]))
    assert.deepStrictEqual(
      [report.election, report.leader.term, report.leader.candidate, report.leader.value, report.leader.revision],
      ["cron", term, "worker-1", "10.0.0.7:8080", 1]
    )
    const text = yield* succeeds(["leader", "cron", ...url])
    assert.include(text, `cron: term ${term} led by worker-1 since `)
    assert.include(text, 'value="10.0.0.7:8080"')
    // The watch prints the leader, then (after the resignation) that nobody leads, and stops.
    const watching = yield* Effect.forkChild(succeeds(["watch", "cron", "--count", "2", "--json", ...url]))
    yield* Effect.sleep("500 millis")
    yield* Deferred.succeed(resign, undefined)
    yield* Fiber.join(leader)
    const lines = (yield* Fiber.join(watching))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
    assert.deepStrictEqual(
      lines.map((line) => line.leader?.term ?? null),
      [term, null]
    )
    assert.include(yield* fails(["watch", "cron", "--count", "0", ...url]), "--count must be at least 1")
  })
