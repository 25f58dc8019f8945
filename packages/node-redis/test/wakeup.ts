// Helpers for the wake-up suites: timing one handoff between two clients, as between two processes.
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Lock, LockScripts } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import type { RedisServer } from "@sage/lock-testkit"

export const namespace = "wake"
export const lockKeyOf = (key: string): string => `${namespace}:{${key}}`

/** A lock client over `backend`, as another process would have (one backend per process). */
export const clientOver = (backend: LockBackend["Service"]) =>
  Lock.make({ namespace, leaseDuration: "30 seconds" }).pipe(Effect.provideService(LockBackend, backend))

export const now = Effect.sync(() => performance.now())

/** The server node holding a lock key's queue (the only node on standalone). */
export type NodeFor = (lockKey: string) => Effect.Effect<RedisServer.RedisServer, unknown>

/** Polls until `n` waiters are registered for `key` at the server. */
export const waitersRegistered = (nodeFor: NodeFor, key: string, n: number) =>
  Effect.gen(function* () {
    const [lockKey, waiters] = LockScripts.keysOf(lockKeyOf(key))
    const node = yield* Effect.orDie(nodeFor(lockKey))
    for (let i = 0; i < 500; i++) {
      if (Number(yield* Effect.orDie(node.command("ZCARD", waiters))) >= n) return
      yield* Effect.sleep(5)
    }
    return yield* Effect.die(`fewer than ${n} waiters registered for ${key}`)
  })

/**
 * Without wake-ups, a waiter that has waited this long polls a few hundred ms apart; woken, it
 * follows a release within a round trip or two. Holding this long after the waiter registered makes
 * the difference visible.
 */
export const holdAfterRegistered = 800

/**
 * One handoff: `holder` takes `key`, `waiter` then waits for it; once the waiter is registered (and
 * has waited `holdAfterRegistered` ms), the holder releases. Returns the ms from the end of the
 * holder's body to the start of the waiter's.
 */
export const handoff = (
  nodeFor: NodeFor,
  holder: Lock.LockClient<string>,
  waiter: Lock.LockClient<string>,
  key: string
) =>
  Effect.gen(function* () {
    let releasedAt = 0
    const inside = yield* Deferred.make<void>()
    const held = yield* Effect.forkChild(
      holder.withLock(key, { waitTimeout: "5 seconds" })(
        Deferred.succeed(inside, undefined).pipe(
          Effect.andThen(waitersRegistered(nodeFor, key, 1)),
          Effect.andThen(Effect.sleep(holdAfterRegistered)),
          Effect.andThen(Effect.sync(() => (releasedAt = performance.now())))
        )
      )
    )
    yield* Deferred.await(inside)
    const startedAt = yield* waiter.withLock(key, { waitTimeout: "10 seconds" })(now)
    yield* Fiber.join(held)
    return startedAt - releasedAt
  })

export const median = (values: ReadonlyArray<number>): number =>
  values.toSorted((a, b) => a - b)[Math.floor(values.length / 2)]!

export const show = (values: ReadonlyArray<number>): string => values.map((v) => v.toFixed(1)).join(", ")
