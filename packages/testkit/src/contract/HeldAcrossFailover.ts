// A lock held across a failover, for any replicated backend: the body outlives the switch, the
// release reaches the promoted master, and the next acquisition lands there.
import { assert } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { Lock } from "@sage/lock"
import type { RedisServer } from "../RedisServer.ts"

/**
 * Holds `key` (its lease must outlast the switch) for six seconds while `failover` runs, given the
 * current master of the key's Redis name; checks the body ended normally, nothing is left on the
 * promoted master, and a new acquisition is held there.
 */
export const heldAcrossFailover = (
  lock: Lock.LockClient<string>,
  key: string,
  masterOf: (redisKey: string) => Effect.Effect<RedisServer, unknown>,
  failover: (redisKey: string) => Effect.Effect<RedisServer, unknown>
): Effect.Effect<void, unknown> =>
  Effect.gen(function* () {
    const redisKey = `${lock.namespace}:{${key}}`
    const inside = yield* Deferred.make<void>()
    const held = yield* Effect.forkChild(
      lock.withLock(key, { waitTimeout: "5 seconds" })(
        Deferred.succeed(inside, undefined).pipe(Effect.andThen(Effect.sleep("6 seconds")), Effect.as("done"))
      )
    )
    yield* Deferred.await(inside)
    const old = yield* masterOf(redisKey)
    const promoted = yield* failover(redisKey)
    assert.notStrictEqual(promoted.port, old.port)
    assert.strictEqual(yield* Fiber.join(held), "done")
    assert.isNull(yield* promoted.command("GET", redisKey), "released on the promoted master")
    yield* lock.withLock(key, { waitTimeout: "5 seconds" })(
      Effect.flatMap(promoted.command("EXISTS", redisKey), (exists) =>
        Effect.sync(() => assert.strictEqual(Number(exists), 1, "held on the promoted master"))
      )
    )
  })
