// Batched renewal on a real server: many held locks are renewed in a few round trips (one
// `renewAll` script per chunk of leases per tick), and none of them is lost. The timing rules of a
// batch (a late reply loses only the leases it came too late for) are pinned under TestClock in the
// lock package; this shows the wire side: the script, its replies, and the command count.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

/** Calls of EVALSHA the server has executed so far. */
const evalshaCalls = (server: RedisServer.RedisServer) =>
  Effect.map(server.command("INFO", "commandstats"), (info) => {
    const match = /cmdstat_evalsha:calls=(\d+)/.exec(String(info))
    return match === null ? 0 : Number(match[1])
  })

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`batched renewal on ${flavor}`, () => {
    it.live(
      "10,000 held locks are all kept, renewed in batches rather than one request per lock",
      () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          const backend = yield* NodeRedisBackend.make({ url: server.url })
          // A 4 s lease renews every 1.33 s: about 4 renewals per lock over the 5-6 s hold.
          const lock = yield* Lock.make({ namespace: "batch", leaseDuration: "4 seconds" }).pipe(
            Effect.provideService(LockBackend, backend)
          )
          const count = 10_000
          const before = yield* evalshaCalls(server)
          // Acquisitions go out at most 200 at a time (a permit is returned when the body starts), so
          // the burst measures holding many locks, not how fast this loaded machine can take them.
          const acquiring = yield* Semaphore.make(200)
          let held = 0
          const outcomes = yield* Effect.forEach(
            Array.from({ length: count }, (_, i) => `held-${i}`),
            (key) =>
              Effect.suspend(() => {
                let permit = true
                const giveBack = Effect.suspend(() => (permit ? ((permit = false), acquiring.release(1)) : Effect.void))
                const body = Effect.sync(() => held++).pipe(
                  Effect.andThen(giveBack),
                  // Bodies end over a second, so the releases do not all land in one burst either.
                  Effect.andThen(Effect.sleep(5_000 + Math.floor(Math.random() * 1_000)))
                )
                return acquiring
                  .take(1)
                  .pipe(
                    Effect.andThen(lock.withLock(key, { waitTimeout: "30 seconds" })(body)),
                    Effect.ensuring(giveBack),
                    Effect.result
                  )
              }),
            { concurrency: "unbounded" }
          )
          const after = yield* evalshaCalls(server)
          const failures = outcomes.filter((outcome) => outcome._tag === "Failure")
          assert.strictEqual(held, count, "every body started")
          assert.deepStrictEqual(
            failures.slice(0, 3).map((f) => (f._tag === "Failure" ? f.failure._tag : "")),
            [],
            `${failures.length} of ${count} locks failed`
          )
          // Acquire and release are one script each per lock; everything else is renewal.
          const renewalRequests = after - before - 2 * count
          assert.isAbove(renewalRequests, 0, "the locks were renewed")
          assert.isBelow(renewalRequests, count / 10, `${renewalRequests} renewal requests for ${count} locks`)
          // Each lock leaves only its fence key (the last fencing token, kept for a week).
          assert.strictEqual(yield* server.command("DBSIZE"), count, "every lock was released")
          const [, sample] = (yield* server.command("SCAN", "0", "MATCH", "batch:{held-1}*", "COUNT", "100000")) as [
            string,
            Array<string>
          ]
          assert.deepStrictEqual(sample, ["batch:{held-1}:fence"])
        }),
      120_000
    )
  })
}
