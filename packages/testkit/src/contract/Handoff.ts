// Timing one lock handoff between two clients, as between two processes: what the wake-up suites
// of every backend assert (a release wakes a waiter well before its next poll could).
import { assert } from "@effect/vitest"
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
 * Polls until the waiter registered for `key` has attempted again: the busy reply of each attempt
 * moves its registration's expiry (the `:waiting` score), so a change there is the waiter's poll.
 */
export const waiterPolledAgain = (nodeFor: NodeFor, key: string) =>
  Effect.gen(function* () {
    const [lockKey, , waitingUntil] = LockScripts.keysOf(lockKeyOf(key))
    const node = yield* Effect.orDie(nodeFor(lockKey))
    const expiries = Effect.map(Effect.orDie(node.command("ZRANGE", waitingUntil, "0", "-1", "WITHSCORES")), String)
    const first = yield* expiries
    for (let i = 0; i < 1_000; i++) {
      yield* Effect.sleep(5)
      if ((yield* expiries) !== first) return
    }
    return yield* Effect.die(`the waiter for ${key} did not attempt again within 5 s`)
  })

/**
 * The handoff a wake-up makes, with room for a loaded machine, and well under what polling costs.
 *
 * `handoff` releases just after the waiter's poll. With a 30 s lease a registered waiter polls every
 * 0.5-1 s (half to all of the 1 s backoff cap), so without a wake-up its next attempt comes at least
 * 500 ms after the release; woken, it follows within a round trip or two (a few ms here, up to about
 * 230 ms measured on a cold connection while other suites loaded both cores). No handoff without a
 * wake-up can come in under this bound, so a test asserting it cannot pass by polling.
 */
export const wokenWithinMillis = 300

/**
 * One handoff: `holder` takes `key`, `waiter` then waits for it; once the waiter is registered and
 * has polled again (so its subscription is in place and its next poll is at least 500 ms away), the
 * holder releases. Returns the ms from the end of the holder's body to the start of the waiter's.
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
          Effect.andThen(waiterPolledAgain(nodeFor, key)),
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

/**
 * Handoffs from `holder` to `waiter` on `key`, one after another, until three in a row were woken
 * (each under `wokenWithinMillis`) or `budgetMillis` passed. Returns every gap in ms, in order, and
 * whether the last three were woken: for a waiter whose wake-ups stopped and should come back.
 */
export const handoffsUntilWoken = (
  nodeFor: NodeFor,
  holder: Lock.LockClient<string>,
  waiter: Lock.LockClient<string>,
  key: string,
  budgetMillis: number
) =>
  Effect.gen(function* () {
    const start = yield* now
    const gaps: Array<number> = []
    const woken = () => gaps.length >= 3 && gaps.slice(-3).every((gap) => gap < wokenWithinMillis)
    while (!woken() && (yield* now) - start < budgetMillis) gaps.push(yield* handoff(nodeFor, holder, waiter, key))
    return { gaps, woken: woken() }
  })

/**
 * Wake-ups stop when the waiter's connections go silent, and come back: a handoff from `holder` to
 * `waiter` on `key` is woken; then every connection open through `proxies` (all of the waiter's)
 * forwards nothing while new ones pass. The waiter's lock connections are replaced first (a lock call
 * times out and its probe goes unanswered), then, once a wait that ran out has had its `PING`
 * unanswered for 5 s, its subscriber connection: handoffs come by polling, then are woken again
 * within `budgetMillis`. Fails the test otherwise.
 */
export const wakeupsComeBackAfterStall = (
  nodeFor: NodeFor,
  holder: Lock.LockClient<string>,
  waiter: Lock.LockClient<string>,
  key: string,
  proxies: ReadonlyArray<{ readonly stallOpen: Effect.Effect<void> }>,
  budgetMillis: number
) =>
  Effect.gen(function* () {
    assert.isBelow(yield* handoff(nodeFor, holder, waiter, key), wokenWithinMillis, "wake-up works before the fault")
    yield* Effect.forEach(proxies, (proxy) => proxy.stallOpen, { discard: true })
    yield* waiter.withLock(key, { waitTimeout: "25 seconds" })(Effect.void)
    const { gaps, woken } = yield* handoffsUntilWoken(nodeFor, holder, waiter, key, budgetMillis)
    assert.isTrue(woken, `handoff ms since the stall, in order: ${show(gaps)}`)
    assert.isAbove(gaps.length, 3, "the first handoffs after the stall came by polling")
  })
