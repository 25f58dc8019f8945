/**
 * Contract: elections. The leader's record on the server, observers in other clients told of each
 * change in term order, resigning handing over without waiting out the lease, a lost lead stopping
 * its work and its term, and one leader at a time under concurrent campaigns.
 *
 * @since 0.2.1
 */
import { assert, type Vitest } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { Election } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { ServerControl } from "./ServerControl.ts"
import { eventually, now, overlapRecorder, type Reach, reaching, redisKey, uniqueNamespace } from "./support.ts"

type It = Vitest.MethodsNonLive<LockBackend | ServerControl>

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  return reason === undefined ? undefined : (reason as unknown as { readonly error: E }).error
}

/** A hash as `HGETALL` answers it: a flat array of fields and values, or an object. */
const fieldsOf = (reply: unknown): Record<string, string> => {
  if (!Array.isArray(reply)) return reply as Record<string, string>
  const fields: Record<string, string> = {}
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1])
  return fields
}

/** What an observer saw, each with when (ms). */
interface Seen {
  readonly at: number
  readonly state: Option.Option<Election.Leader>
}

/** Forks an observer of `name` that records what it sees. */
const watch = (elections: Election.ElectionClient, name: string) =>
  Effect.gen(function* () {
    const seen: Array<Seen> = []
    const fiber = yield* Effect.forkChild(
      Stream.runForEach(elections.observe(name), (state) =>
        Effect.map(now, (at) => {
          seen.push({ at, state })
        })
      )
    )
    return { seen, fiber }
  })

const candidateOf = (seen: Seen): string =>
  Option.match(seen.state, { onNone: () => "-", onSome: (leader) => leader.candidate })

/** The observed states never go back: terms rise, or the same term's revision does; no term returns. */
const assertOrdered = (seen: ReadonlyArray<Seen>): void => {
  let term = 0
  let revision = 0
  let ended = false
  for (const { state } of seen) {
    if (Option.isNone(state)) {
      ended = true
      continue
    }
    const leader = state.value
    assert.isTrue(
      leader.term > term || (leader.term === term && !ended && leader.revision > revision),
      `observed term ${leader.term}/${leader.revision} after ${term}/${revision}${ended ? " ended" : ""}`
    )
    term = leader.term
    revision = leader.revision
    ended = false
  }
}

export const election = (it: It, reach: Reach): void => {
  const keys = reaching(it, reach, "keys")
  const server = reaching(it, reach, "server")
  server.effect(
    "E1. resign hands the lead over at once, and another client's observer is told of each change in order",
    () =>
      Effect.gen(function* () {
        const control = yield* ServerControl
        const namespace = uniqueNamespace("elect")
        // A long lease and, where the backend has wake-ups, a long observer interval: a handover or a
        // sighting within a second or two can only come from the resignation and the proclamation's
        // message, never from expiry or a fallback read. Without wake-ups observers only read.
        const pushed = (yield* LockBackend).wakeups !== undefined
        const options = {
          namespace,
          leaseDuration: "20 seconds",
          observeInterval: pushed ? "10 seconds" : "100 millis"
        } as const
        const a = yield* Election.make({ ...options, candidate: "a" })
        const b = yield* Election.make({ ...options, candidate: "b" })
        const observer = yield* Election.make({ ...options, candidate: "observer" })
        const { seen, fiber } = yield* watch(observer, "cron")
        yield* eventually(
          "the observer's first state",
          Effect.sync(() => seen.length === 1)
        )
        assert.strictEqual(candidateOf(seen[0]!), "-", "nobody leads at first")

        const aResign = yield* Deferred.make<void>()
        const aTerm = yield* Deferred.make<number>()
        const aFiber = yield* Effect.forkChild(
          Effect.scoped(
            Effect.gen(function* () {
              const leadership = yield* a.campaign("cron", { value: "10.0.0.1:80" })
              yield* Deferred.succeed(aTerm, leadership.term)
              yield* leadership.proclaim("10.0.0.1:81")
              yield* Deferred.await(aResign)
              yield* leadership.resign
              // The scope stays open after resigning, and the lead is over.
              assert.isTrue(Option.isNone(yield* leadership.lead(Effect.never)))
            })
          )
        )
        const term = yield* Deferred.await(aTerm)
        const key = redisKey(namespace, "cron")
        const record = fieldsOf(yield* control.command(key, "HGETALL", `${key}:leader`))
        assert.strictEqual(record.term, String(term), "the record is on the server, in the lock's hash tag")
        assert.strictEqual(record.candidate, "a")
        yield* eventually(
          "the observer sees a's second proclamation",
          Effect.sync(() => seen.some((s) => Option.isSome(s.state) && s.state.value.revision === 2)),
          3_000
        )
        const latest = Option.getOrThrow(seen[seen.length - 1]!.state)
        assert.deepStrictEqual([latest.candidate, latest.value, latest.term], ["a", "10.0.0.1:81", term])

        const bDone = yield* Deferred.make<void>()
        const bFiber = yield* Effect.forkChild(
          Effect.scoped(
            Effect.flatMap(b.campaign("cron", { value: "10.0.0.2:80" }), (leadership) =>
              Effect.as(Deferred.await(bDone), leadership.term)
            )
          )
        )
        yield* Effect.sleep(100)
        const resignedAt = yield* now
        yield* Deferred.succeed(aResign, undefined)
        yield* eventually(
          "the observer sees b lead",
          Effect.sync(() => seen.some((s) => candidateOf(s) === "b")),
          3_000
        )
        const bSeen = seen.find((s) => candidateOf(s) === "b")!
        assert.isBelow(bSeen.at - resignedAt, 3_000, "well within the 20 s lease")
        yield* Deferred.succeed(bDone, undefined)
        const bTerm = yield* Fiber.join(bFiber)
        yield* Fiber.join(aFiber)
        assert.isAbove(bTerm, term, "the next term is higher")
        // b's scope has closed: nobody leads, and the observer is told.
        yield* eventually(
          "the observer sees nobody lead after b",
          Effect.sync(() => candidateOf(seen[seen.length - 1]!) === "-"),
          3_000
        )
        yield* Fiber.interrupt(fiber)
        assertOrdered(seen)
        assert.isTrue(Option.isNone(yield* observer.leader("cron")))
      })
  )

  keys.effect(
    "E2. a lead whose key is deleted is lost: the work stops with LockLost, the term cannot proclaim, observers see nobody",
    () =>
      Effect.gen(function* () {
        const control = yield* ServerControl
        const namespace = uniqueNamespace("elect")
        const elections = yield* Election.make({
          namespace,
          leaseDuration: "900 millis",
          observeInterval: "200 millis"
        })
        const { seen, fiber } = yield* watch(elections, "sched")
        const exit = yield* Effect.scoped(
          Effect.gen(function* () {
            const leadership = yield* elections.campaign("sched", { interruptOnLoss: false })
            yield* eventually(
              "the observer sees the leader",
              Effect.sync(() => seen.some((s) => Option.isSome(s.state)))
            )
            let interrupted = false
            const work = yield* Effect.forkChild(
              leadership.lead(Effect.onInterrupt(Effect.never, () => Effect.sync(() => (interrupted = true))))
            )
            yield* control.del(redisKey(namespace, "sched"))
            const result = yield* Fiber.await(work)
            assert.isTrue(interrupted, "the work was interrupted")
            const proclaimed = yield* Effect.exit(leadership.proclaim("still here?"))
            assert.strictEqual((failureOf(proclaimed) as { _tag?: string } | undefined)?._tag, "LockLost")
            return result
          })
        )
        assert.strictEqual((failureOf(exit) as { _tag?: string } | undefined)?._tag, "LockLost")
        yield* eventually(
          "the observer sees nobody lead",
          Effect.sync(() => candidateOf(seen[seen.length - 1]!) === "-"),
          3_000
        )
        yield* Fiber.interrupt(fiber)
        assertOrdered(seen)
      })
  )

  it.effect("E3. concurrent candidates under run: one leader at a time, every term seen in order", () =>
    Effect.gen(function* () {
      const namespace = uniqueNamespace("elect")
      // Observers read when told of a change; without wake-ups they only read at their interval, and
      // terms last longer so that they are seen.
      const pushed = (yield* LockBackend).wakeups !== undefined
      const options = {
        namespace,
        leaseDuration: "5 seconds",
        observeInterval: pushed ? "200 millis" : "25 millis"
      } as const
      const termMillis = pushed ? 30 : 100
      // A lock's waiters queue at the server only where releases wake them: there a resigning leader
      // that campaigns again 20 ms later stands behind the others. Pollers keep no place in line, so
      // the leader rejoins only after the longest poll (the backoff's 1 s cap) for the others to win.
      const rejoinDelay = pushed ? "20 millis" : "1500 millis"
      const terms = pushed ? 9 : 4
      const recorder = overlapRecorder()
      const clients = yield* Effect.forEach(["a", "b", "c"], (candidate) => Election.make({ ...options, candidate }))
      const { seen, fiber } = yield* watch(clients[0]!, "leader")
      // Each term does a little work and then ends (run resigns and campaigns again).
      // The exit is counted however the work ends: a leader interrupted in its work (when the
      // runners stop) has left it.
      const work = () =>
        Effect.acquireUseRelease(
          recorder.enter,
          () => Effect.sleep(termMillis),
          () => recorder.exit
        )
      const runners = yield* Effect.forEach(clients, (client) =>
        Effect.forkChild(client.run("leader", work, { rejoinDelay }))
      )
      yield* eventually(
        `${terms} terms`,
        Effect.sync(() => recorder.completed() >= terms),
        20_000
      )
      yield* Effect.forEach(runners, Fiber.interrupt, { concurrency: "unbounded" })
      assert.strictEqual(recorder.maxInside(), 1, "never two leaders at once")
      yield* eventually(
        "the observer sees nobody lead once every candidate stopped",
        Effect.sync(() => candidateOf(seen[seen.length - 1]!) === "-"),
        3_000
      )
      yield* Fiber.interrupt(fiber)
      assertOrdered(seen)
      const leaders = new Set(seen.flatMap((s) => (Option.isSome(s.state) ? [s.state.value.candidate] : [])))
      assert.isAtLeast(leaders.size, 2, `more than one candidate led: ${[...leaders].join(", ")}`)
    })
  )
}
