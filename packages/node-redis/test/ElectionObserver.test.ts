// Election observers on a real server, through broken connections: an observer whose connections are
// killed (its subscriber and its commands' connections) resumes at the current term, terms rising.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { Election } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import { eventually } from "@sage/lock-testkit/contract/support"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { namespace } from "./support.ts"

/** An election client over its own backend, as another process would have. */
const electionsOn = (url: string, options: Election.ElectionOptions) =>
  Effect.flatMap(NodeRedisBackend.make({ url }), (backend) =>
    Election.make(options).pipe(Effect.provideService(LockBackend, backend))
  )

/**
 * Campaigns for `name` in the background and holds the lead until `done` completes: the fiber, and
 * the term once it leads.
 */
const leadUntil = (elections: Election.ElectionClient, name: string, done: Deferred.Deferred<void>) =>
  Effect.gen(function* () {
    const term = yield* Deferred.make<number>()
    const fiber = yield* Effect.forkChild(
      Effect.scoped(
        Effect.gen(function* () {
          const leadership = yield* elections.campaign(name)
          yield* Deferred.succeed(term, leadership.term)
          yield* Deferred.await(done)
        })
      )
    )
    return { term: Deferred.await(term), fiber }
  })

const termOf = (state: Option.Option<Election.Leader>): number =>
  Option.match(state, { onNone: () => 0, onSome: (leader) => leader.term })

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`election observers on ${flavor}`, () => {
    it.live("an observer whose connections are killed resumes at the current term", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const options = {
          namespace: namespace("obs"),
          leaseDuration: "10 seconds",
          observeInterval: "300 millis"
        } as const
        const a = yield* electionsOn(server.url, { ...options, candidate: "a" })
        const b = yield* electionsOn(server.url, { ...options, candidate: "b" })
        const observer = yield* electionsOn(server.url, options)
        const seen: Array<Option.Option<Election.Leader>> = []
        const watching = yield* Effect.forkChild(
          Stream.runForEach(observer.observe("svc"), (state) => Effect.sync(() => seen.push(state)))
        )
        const aDone = yield* Deferred.make<void>()
        const first = yield* leadUntil(a, "svc", aDone)
        const firstTerm = yield* first.term
        yield* eventually(
          "the observer sees a",
          Effect.sync(() => seen.some((s) => termOf(s) === firstTerm))
        )
        // Every connection but the test's own: the observer's subscriber and command connections too.
        yield* server.command("CLIENT", "KILL", "TYPE", "pubsub")
        yield* server.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        const bDone = yield* Deferred.make<void>()
        const second = yield* leadUntil(b, "svc", bDone)
        yield* Effect.sleep(100)
        yield* Deferred.succeed(aDone, undefined)
        yield* Fiber.join(first.fiber)
        const secondTerm = yield* second.term
        assert.isAbove(secondTerm, firstTerm)
        yield* eventually(
          "the observer sees b",
          Effect.sync(() => seen.some((s) => termOf(s) === secondTerm)),
          5_000
        )
        yield* Deferred.succeed(bDone, undefined)
        yield* Fiber.join(second.fiber)
        yield* Fiber.interrupt(watching)
        const terms = seen.map(termOf).filter((term) => term > 0)
        assert.deepStrictEqual(
          terms,
          [...new Set(terms)].toSorted((x, y) => x - y),
          "terms rise, none repeated"
        )
      })
    )
  })
}
