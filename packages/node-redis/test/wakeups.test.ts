// The wake-up waits when a subscription fails, and what a message says, driven through the module with
// a subscriber that fails as node-redis does (its error classes): rare branches a real server cannot be
// made to take on demand (a subscription refused by a connection error at once). The end-to-end
// behaviour on real servers (NOPERM, a subscriber that cannot connect) is in DepartedWaiters.test.ts.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { TestClock } from "effect/testing"
import { ErrorReply, SocketClosedUnexpectedlyError } from "redis"
import { LockScripts } from "@sage/lock"
import { classify } from "../src/internal/connection/classify.ts"
import * as Wakeups from "../src/internal/wakeups/wakeups.ts"
import type { Subscriber } from "../src/internal/wakeups/subscriber.ts"

/** A subscriber whose every SUBSCRIBE fails with `error`, counting them. */
const refusing = (error: unknown) => {
  const state = { subscribes: 0 }
  const subscriber: Subscriber = {
    subscribe: () => {
      state.subscribes++
      return Promise.reject(error)
    },
    unsubscribe: () => Promise.resolve()
  }
  return { state, subscriber }
}

/** A subscriber that accepts every SUBSCRIBE and lets the test publish. */
const accepting = () => {
  const listeners = new Map<string, (message: string) => void>()
  const subscriber: Subscriber = {
    subscribe: (channel, listener) => {
      listeners.set(channel, listener)
      return Promise.resolve()
    },
    unsubscribe: (channel) => {
      listeners.delete(channel)
      return Promise.resolve()
    }
  }
  return { listeners, subscriber }
}

describe("wake-up waits", () => {
  it.effect("a SUBSCRIBE refused for good fails the wait with that error", () =>
    Effect.gen(function* () {
      const { subscriber } = refusing(new ErrorReply("NOPERM User locker has no permissions to access the channel"))
      const wakeups = yield* Wakeups.make({
        subscriber: () => Promise.resolve(subscriber),
        classify,
        leave: () => Effect.void
      })
      const error = yield* Effect.flip(wakeups.await("ns:{k}", "w", 1_000))
      assert.strictEqual(error.code, "NOPERM")
      assert.isFalse(error.retryable)
    })
  )

  it.effect("a SUBSCRIBE that fails for now waits out the wait: one attempt a wait, never a loop", () =>
    Effect.gen(function* () {
      const { state, subscriber } = refusing(new SocketClosedUnexpectedlyError())
      const wakeups = yield* Wakeups.make({
        subscriber: () => Promise.resolve(subscriber),
        classify,
        leave: () => Effect.void
      })
      const waiting = yield* Effect.forkChild(wakeups.await("ns:{k}", "w", 1_000))
      // Let the refusal come back (a promise, outside the test clock).
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      yield* TestClock.adjust(900)
      assert.isUndefined(waiting.pollUnsafe(), "still waiting after 900 of its 1000 ms")
      yield* TestClock.adjust(200)
      assert.isFalse(yield* Fiber.join(waiting), "then polls as if no message came")
      assert.strictEqual(state.subscribes, 1)
    })
  )

  it.effect("a waiter hears a grant, the waiter ahead being served, or a plain wake-up", () =>
    Effect.gen(function* () {
      const { listeners, subscriber } = accepting()
      const wakeups = yield* Wakeups.make({
        classify,
        subscriber: () => Promise.resolve(subscriber),
        leave: () => Effect.void,
        grants: true
      })
      const key = "ns:{k}"
      const channel = LockScripts.grantChannel(key, "g.w")
      // The first wait subscribes and answers "try now" (a release may have come before).
      assert.isTrue(yield* wakeups.await(key, "g.w", 1_000))
      const heard = (message: string) =>
        Effect.gen(function* () {
          const waiting = yield* Effect.forkChild(wakeups.await(key, "g.w", 5_000))
          yield* Effect.yieldNow
          listeners.get(channel)!(message)
          return yield* Fiber.join(waiting)
        })
      assert.deepStrictEqual(yield* heard("g.w:123:500"), {
        _tag: "Granted",
        token: "g.w:123",
        fence: 123,
        leaseMillis: 500
      })
      assert.deepStrictEqual(yield* heard("g.w:next:500"), { _tag: "Next", claimMillis: 500 })
      assert.isTrue(yield* heard("g.w"))
    })
  )
})
