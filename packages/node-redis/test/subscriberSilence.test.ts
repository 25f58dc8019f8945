// The Sentinel layer's wake-up subscriber (its own connection to the master) when that connection goes
// silent: driven directly over a proxy in front of one server, which stands in for the master (the
// subscriber only needs an address). The standalone layer's subscriber is covered end to end in
// Wakeup.test.ts.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { LockScripts } from "@sage/lock"
import { FaultProxy, RedisServer, ServerBinary } from "@sage/lock-testkit"
import { masterSubscriber } from "../src/internal/replicated/sentinel/masterSubscriber.ts"
import { nodeRedisLinks } from "../src/internal/replicated/sentinel/nodeRedisLinks.ts"
import { classify } from "../src/internal/connection/classify.ts"
import * as Wakeups from "../src/internal/wakeups/wakeups.ts"

const [flavor] = ServerBinary.flavorsUnderTest()
const now = Effect.sync(() => performance.now())

describe("the Sentinel master subscriber", () => {
  it.live("a connection that goes silent is discarded, and its channels are subscribed again on a new one", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor: flavor! })
      const proxy = yield* FaultProxy.make({ upstreamPort: server.port })
      const master = masterSubscriber(
        () => ({ host: "127.0.0.1", port: proxy.port }),
        nodeRedisLinks(undefined, undefined)
      )
      const { subscriber } = yield* master
      const wakeups = yield* Wakeups.make({
        classify,
        subscriber: () => Promise.resolve(subscriber),
        leave: () => Effect.void
      })
      const key = "silence:{k}"
      // One wait of at most `millis`, with a release naming the waiter published 50 ms into it.
      const wokenWithin = (millis: number, on = key) =>
        Effect.gen(function* () {
          const waiting = yield* Effect.forkChild(wakeups.await(on, "w", millis))
          yield* Effect.sleep(50)
          yield* server.command("PUBLISH", LockScripts.wakeChannel(on), "w")
          return (yield* Fiber.join(waiting)) === true
        })
      // The first wait subscribes and returns once the subscription is in place.
      assert.isTrue(yield* wakeups.await(key, "w", 5_000), "subscribed")
      assert.isTrue(yield* wokenWithin(1_000), "a release wakes the waiter before the fault")
      // A wait that runs out asks the connection PING; answered (in subscribed mode), it is kept.
      const pings = Effect.map(server.command("INFO", "commandstats"), (info) =>
        Number(/cmdstat_ping:calls=(\d+)/.exec(String(info))?.[1] ?? 0)
      )
      const pingsBefore = yield* pings
      assert.isFalse(yield* wakeups.await(key, "w", 100), "nobody released")
      yield* Effect.sleep(5_500)
      assert.strictEqual((yield* pings) - pingsBefore, 1, "one PING for the lapsed wait")
      assert.strictEqual(proxy.connectionCount, 1, "the answering connection was kept")
      assert.isTrue(yield* wokenWithin(1_000), "and still delivers")
      yield* proxy.stallOpen
      // A first wait on another key: its SUBSCRIBE goes to the silent connection and stays pending
      // until that connection is discarded, after it was sent again on the replacement.
      const later = "silence:{later}"
      yield* Effect.forkChild(wakeups.await(later, "w", 1_000))
      // Each 1 s wait now runs out without the message; one of them asks PING, which goes
      // unanswered, and 5 s later the connection is replaced.
      const stalledAt = yield* now
      let waits = 0
      let woken = false
      while (!woken && (yield* now) - stalledAt < 20_000) {
        woken = yield* wokenWithin(1_000)
        waits++
      }
      assert.isTrue(woken, "wake-ups resumed on a new connection")
      assert.isAbove(waits, 3, "the silent connection was given its 5 s first")
      assert.isTrue(yield* wokenWithin(1_000), "and they keep coming")
      // The other key's subscription is the one made on the replacement: kept, not dropped when the
      // pending one failed (a wait on a dropped channel would subscribe afresh and return at once).
      assert.isFalse(yield* wakeups.await(later, "w", 300), "still subscribed: the wait runs its course")
      assert.isTrue(yield* wokenWithin(1_000, later), "and a release on it wakes the waiter")
      assert.isFalse(yield* wakeups.await(later, "w", 300), "once: no second listener left a stale wake-up")
    })
  )
})
