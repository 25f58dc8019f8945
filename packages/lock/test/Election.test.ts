// Elections on the in-memory backend under TestClock: options, the term and the record, observers'
// order, resigning, losing the lead, and the service loop. The same calls run against real servers
// in the contract suite (`packages/testkit/src/contract/election.ts`).
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import fc from "fast-check"
import * as Election from "../src/Election.ts"
import * as ElectionMetrics from "../src/ElectionMetrics.ts"
import type { Leadership } from "../src/Leadership.ts"
import { type ElectionView, LockBackend } from "../src/LockBackend.ts"
import { LockRedisError } from "../src/LockError.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"
import { advance, start } from "../src/internal/election/observe.ts"

const client = (backend: LockBackend["Service"], options: Election.ElectionOptions = {}) =>
  Election.make({ leaseDuration: "1 second", ...options }).pipe(Effect.provideService(LockBackend, backend))

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit)
    ? (exit.cause.reasons.find((r) => r._tag === "Fail") as { error: E } | undefined)?.error
    : undefined

/**
 * A memory backend whose renewals stop finding the key once `renewals.finding` is false: a lead is
 * lost at its next renewal.
 */
const losingRenewals = Effect.map(MemoryBackend.make, (memory) => {
  const renewals = { finding: true }
  const backend: LockBackend["Service"] = {
    ...memory,
    renewAll: undefined,
    renew: (request) => (renewals.finding ? memory.renew(request) : Effect.succeed(false))
  }
  return { backend, renewals }
})

/** Lets forked fibers run to their next wait without moving the clock. */
const settle = Effect.andThen(TestClock.adjust(0), Effect.yieldNow)

describe("Election (in memory)", () => {
  it.effect("bad options and arguments are InvalidArgument naming them", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const made = yield* Effect.exit(client(backend, { candidate: "" }))
      assert.strictEqual((failureOf(made) as { field?: string } | undefined)?.field, "candidate")
      const interval = yield* Effect.exit(client(backend, { observeInterval: "soon" as never }))
      assert.strictEqual((failureOf(interval) as { field?: string } | undefined)?.field, "observeInterval")
      const elections = yield* client(backend)
      const cases: ReadonlyArray<[string, Election.CampaignOptions, string]> = [
        ["", {}, "key"],
        ["e", { value: 7 as never }, "value"],
        ["e", { candidate: "" }, "candidate"],
        ["e", { waitTimeout: -1 }, "waitTimeout"],
        ["e", { interruptOnLoss: "yes" as never }, "interruptOnLoss"]
      ]
      for (const [name, options, field] of cases) {
        const exit = yield* Effect.exit(Effect.scoped(elections.campaign(name, options)))
        assert.strictEqual((failureOf(exit) as { _tag?: string } | undefined)?._tag, "InvalidArgument", field)
        assert.strictEqual((failureOf(exit) as { field?: string } | undefined)?.field, field)
      }
      const observed = yield* Effect.exit(Stream.runCollect(elections.observe("")))
      assert.strictEqual((failureOf(observed) as { field?: string } | undefined)?.field, "key")
    })
  )

  it.effect("a campaign leads with its term and value; proclaim updates the record in the same term", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const elections = yield* client(backend, { candidate: "node-a" })
      assert.isTrue(Option.isNone(yield* elections.leader("jobs")))
      yield* Effect.scoped(
        Effect.gen(function* () {
          const leadership = yield* elections.campaign("jobs", { value: "10.0.0.1" })
          const first = Option.getOrThrow(yield* elections.leader("jobs"))
          assert.deepStrictEqual(
            [first.term, first.candidate, first.value, first.revision],
            [leadership.term, "node-a", "10.0.0.1", 1]
          )
          yield* leadership.proclaim("10.0.0.2")
          const second = Option.getOrThrow(yield* elections.leader("jobs"))
          assert.deepStrictEqual([second.term, second.value, second.revision], [leadership.term, "10.0.0.2", 2])
          assert.strictEqual(second.since, first.since, "a proclamation keeps the term's start")
          assert.strictEqual(yield* leadership.value, "10.0.0.2")
        })
      )
      assert.isTrue(Option.isNone(yield* elections.leader("jobs")), "nobody leads once the scope closed")
    })
  )

  it.effect("resign hands the lead to the next candidate at once; observers see terms in order", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const a = yield* client(backend, { candidate: "a", leaseDuration: "1 minute" })
      const b = yield* client(backend, { candidate: "b", leaseDuration: "1 minute" })
      const seen: Array<Option.Option<Election.Leader>> = []
      const observer = yield* Effect.forkChild(
        Stream.runForEach(a.observe("cron"), (state) => Effect.sync(() => seen.push(state)))
      )
      yield* settle
      const aLeads = yield* Effect.forkChild(
        Effect.scoped(
          Effect.gen(function* () {
            const leadership = yield* a.campaign("cron")
            yield* Effect.sleep("10 seconds")
            yield* leadership.resign
            assert.isTrue(Option.isNone(yield* leadership.lead(Effect.never)), "lead after resign is None")
            return leadership.term
          })
        )
      )
      yield* settle
      const bLeads = yield* Effect.forkChild(Effect.scoped(Effect.map(b.campaign("cron"), (l) => l.term)))
      yield* settle
      yield* TestClock.adjust("10 seconds")
      yield* settle
      const aTerm = yield* Fiber.join(aLeads)
      const bTerm = yield* Fiber.join(bLeads)
      assert.isAbove(bTerm, aTerm)
      yield* settle
      yield* Fiber.interrupt(observer)
      const terms = seen.map((state) => Option.match(state, { onNone: () => 0, onSome: (leader) => leader.term }))
      const candidates = seen.map((state) => Option.match(state, { onNone: () => "-", onSome: (l) => l.candidate }))
      // Nobody, a, b, and nobody after b's scope closed.
      assert.deepStrictEqual(candidates, ["-", "a", "b", "-"])
      assert.deepStrictEqual(terms, [0, aTerm, bTerm, 0])
    })
  )

  it.effect("a lost lead interrupts the work under `lead`, and a stale term cannot proclaim", () =>
    Effect.gen(function* () {
      const { backend, renewals } = yield* losingRenewals
      const elections = yield* client(backend)
      const exit = yield* Effect.scoped(
        Effect.gen(function* () {
          const leadership = yield* elections.campaign("sched", { interruptOnLoss: false })
          let interrupted = false
          const work = yield* Effect.forkChild(
            leadership.lead(Effect.onInterrupt(Effect.never, () => Effect.sync(() => (interrupted = true))))
          )
          yield* settle
          renewals.finding = false
          yield* TestClock.adjust("1 second")
          const result = yield* Fiber.await(work)
          assert.isTrue(interrupted, "the work was interrupted")
          return result
        })
      )
      assert.strictEqual((failureOf(exit) as { _tag?: string } | undefined)?._tag, "LockLost")
      // A later term leads; the old one's proclamation is refused.
      renewals.finding = true
      yield* Effect.scoped(
        Effect.gen(function* () {
          const stale = yield* elections.campaign("other", { interruptOnLoss: false })
          const staleTerm = stale.term
          yield* stale.resign
          const next = yield* elections.campaign("other", { value: "new" })
          assert.isAbove(next.term, staleTerm)
          const refused = yield* Effect.exit(stale.proclaim("old"))
          assert.strictEqual((failureOf(refused) as { _tag?: string } | undefined)?._tag, "LockLost")
          assert.strictEqual(Option.getOrThrow(yield* elections.leader("other")).value, "new")
        })
      )
    })
  )

  it.effect("lead: work that completes after the lock was lost at the server fails with LockLost", () =>
    Effect.gen(function* () {
      const memory = yield* MemoryBackend.make
      let held = true
      // A backend whose server no longer holds the key once `held` is false (renewals are not due yet).
      const backend: LockBackend["Service"] = {
        ...memory,
        check: (request) => (held ? memory.check(request) : Effect.succeed(false))
      }
      const elections = yield* client(backend, { leaseDuration: "1 minute" })
      const exit = yield* Effect.scoped(
        Effect.gen(function* () {
          const leadership = yield* elections.campaign("job", { interruptOnLoss: false })
          assert.deepStrictEqual(yield* leadership.lead(Effect.succeed(1)), Option.some(1))
          held = false
          return yield* Effect.exit(leadership.lead(Effect.succeed(2)))
        })
      )
      const lost = failureOf(exit) as { _tag?: string; bodyCompleted?: boolean } | undefined
      assert.deepStrictEqual([lost?._tag, lost?.bodyCompleted], ["LockLost", true])
    })
  )

  it.effect("campaign: a lock won but not proclaimable within its lease is given back, and the campaign goes on", () =>
    Effect.gen(function* () {
      const memory = yield* MemoryBackend.make
      let refusals = 0
      const elections_ = memory.elections!
      // The first proclamation meets a server that takes no writes for longer than the lease.
      const backend: LockBackend["Service"] = {
        ...memory,
        elections: {
          ...elections_,
          proclaim: (request) =>
            refusals++ === 0
              ? Effect.andThen(
                  Effect.sleep("3 seconds"),
                  Effect.fail(
                    new LockRedisError({
                      command: "EVALSHA",
                      kind: "timeout",
                      code: "TIMEOUT",
                      reply: "no reply",
                      retryable: true,
                      mayHaveExecuted: false
                    })
                  )
                )
              : elections_.proclaim(request)
        }
      }
      const elections = yield* client(backend)
      const fiber = yield* Effect.forkChild(
        Effect.scoped(Effect.map(elections.campaign("job", { waitTimeout: "1 minute" }), (l) => l.term))
      )
      yield* settle
      yield* TestClock.adjust("3 seconds")
      yield* settle
      yield* TestClock.adjust("1 second")
      const term = yield* Fiber.join(fiber)
      assert.isAbove(term, 0)
      assert.strictEqual(refusals, 2, "proclaimed on the second win")
    })
  )

  it.effect("campaign: a lock lost during the first proclamation is the campaign's, never an interruption", () =>
    Effect.gen(function* () {
      const memory = yield* MemoryBackend.make
      const elections_ = memory.elections!
      let proclamations = 0
      let finding = true
      // The first proclamation stalls past the lease while renewals stop finding the key (a server
      // that stopped): the lock is lost before the campaign could return its leadership.
      const backend: LockBackend["Service"] = {
        ...memory,
        renewAll: undefined,
        renew: (request) => (finding ? memory.renew(request) : Effect.succeed(false)),
        elections: {
          ...elections_,
          proclaim: (request) => {
            if (proclamations++ > 0) {
              finding = true
              return elections_.proclaim(request)
            }
            finding = false
            return Effect.andThen(Effect.sleep("5 seconds"), elections_.proclaim(request))
          }
        }
      }
      const elections = yield* client(backend)
      // interruptOnLoss is on (the default): it applies to the leadership returned, not to the campaign.
      const fiber = yield* Effect.forkChild(
        Effect.scoped(Effect.map(elections.campaign("job", { waitTimeout: "1 minute" }), (l) => l.term))
      )
      for (let i = 0; i < 12; i++) {
        yield* settle
        yield* TestClock.adjust("500 millis")
      }
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isSuccess(exit), `the campaign led on its second win, not ${String(exit)}`)
      assert.strictEqual(proclamations, 2, "proclaimed on the second win")
    })
  )

  it.effect("run: a lost lead is logged once, by run, and the loop campaigns again", () =>
    Effect.gen(function* () {
      const { backend, renewals } = yield* losingRenewals
      const warnings: Array<string> = []
      const logger = Logger.make((options) => {
        if (options.logLevel === "Warn") warnings.push(String(options.message))
      })
      const elections = yield* client(backend)
      const terms: Array<number> = []
      const fiber = yield* Effect.forkChild(
        elections
          .run("loop", (leadership) =>
            Effect.andThen(
              Effect.sync(() => terms.push(leadership.term)),
              Effect.never
            )
          )
          .pipe(Effect.provide(Logger.layer([logger])))
      )
      yield* settle
      renewals.finding = false
      // The renewal finds the lead gone; run waits its rejoin delay (1 s) and leads again.
      yield* TestClock.adjust("1 second")
      renewals.finding = true
      yield* TestClock.adjust("1 second")
      yield* settle
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(terms.length, 2, "led again after the loss")
      assert.strictEqual(warnings.length, 1, `one warning: ${JSON.stringify(warnings)}`)
      assert.include(warnings[0], "the lead ended")
    })
  )

  it.effect("run: one leader at a time; when the leader's process stops, another takes over", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      let inside = 0
      let most = 0
      const terms: Array<number> = []
      const work = (leadership: Leadership) =>
        Effect.acquireUseRelease(
          Effect.sync(() => {
            inside++
            most = Math.max(most, inside)
            terms.push(leadership.term)
          }),
          () => Effect.never,
          () => Effect.sync(() => inside--)
        )
      const fibers = yield* Effect.forEach(["a", "b", "c"], (candidate) =>
        Effect.flatMap(client(backend, { candidate }), (elections) => Effect.forkChild(elections.run("leader", work)))
      )
      yield* settle
      assert.strictEqual(terms.length, 1, "one leader")
      // The leader's process stops: its fiber is interrupted and releases; another leads.
      const leaderIndex = yield* Effect.map(
        Effect.flatMap(client(backend), (elections) => elections.leader("leader")),
        (leader) => ["a", "b", "c"].indexOf(Option.getOrThrow(leader).candidate)
      )
      yield* Fiber.interrupt(fibers[leaderIndex]!)
      yield* settle
      assert.strictEqual(terms.length, 2, "a second leader")
      assert.isAbove(terms[1]!, terms[0]!)
      assert.strictEqual(most, 1, "never two leaders at once")
      yield* Effect.forEach(fibers, Fiber.interrupt)
    })
  )

  it.effect("metrics: terms won, each lead's duration by how it ended, and observers' lag", () =>
    Effect.gen(function* () {
      const backend = yield* MemoryBackend.make
      const elections = yield* client(backend, { namespace: "metered" })
      const observer = yield* Effect.forkChild(Stream.runDrain(elections.observe("m")))
      yield* settle
      yield* Effect.scoped(
        Effect.gen(function* () {
          const leadership = yield* elections.campaign("m")
          yield* settle
          yield* TestClock.adjust("3 seconds")
          yield* leadership.resign
        })
      )
      yield* settle
      yield* Fiber.interrupt(observer)
      const attributes = { namespace: "metered" }
      const terms = yield* Metric.value(Metric.withAttributes(ElectionMetrics.terms, attributes))
      assert.strictEqual(terms.count, 1)
      const durations = yield* Metric.value(
        Metric.withAttributes(ElectionMetrics.leadershipDuration, { ...attributes, outcome: "resigned" })
      )
      assert.deepStrictEqual([durations.count, durations.sum], [1, 3])
      const lag = yield* Metric.value(Metric.withAttributes(ElectionMetrics.observerLag, attributes))
      assert.strictEqual(lag.count, 1, "the observer saw one new term")
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it("observers never show a term going back, an ended term again, or the same state twice", () => {
    const view = fc.oneof(
      fc.constant<ElectionView>({ _tag: "Vacant" }),
      fc.integer({ min: 1, max: 6 }).map((term): ElectionView => ({ _tag: "Unproclaimed", term })),
      fc
        .tuple(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 3 }))
        .map(([term, revision]): ElectionView => ({
          _tag: "Leading",
          record: { term, candidate: `c${term}`, value: "", since: 0, revision }
        }))
    )
    fc.assert(
      fc.property(fc.array(view, { maxLength: 40 }), (views) => {
        let shown = start
        const emitted: Array<Option.Option<{ term: number; revision: number }>> = []
        for (const v of views) {
          const step = advance(shown, v)
          if (step === undefined) continue
          if (step.element !== undefined) emitted.push(step.element)
          shown = step.shown
        }
        const ended = new Set<number>()
        let last: { term: number; revision: number } | undefined
        let previousWasNone = false
        emitted.forEach((state, index) => {
          if (Option.isNone(state)) {
            assert.isFalse(previousWasNone && index > 0, "no two Nones in a row")
            if (last !== undefined) ended.add(last.term)
            previousWasNone = true
            return
          }
          const now = state.value
          assert.isFalse(ended.has(now.term), "an ended term never comes back")
          if (last !== undefined) {
            assert.isTrue(
              now.term > last.term || (now.term === last.term && now.revision > last.revision),
              "strictly forward"
            )
          }
          last = now
          previousWasNone = false
        })
      })
    )
  })
})
