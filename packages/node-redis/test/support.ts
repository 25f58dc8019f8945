// Helpers shared by the replicated-deployment suites: unique namespaces, clients over a backend, and
// a lock held in the background while a fault is injected.
import * as Effect from "effect/Effect"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import { forkUntilInside } from "@sage/lock-testkit/contract/support"

export const namespace = (prefix: string): string => `${prefix}-${Math.random().toString(36).slice(2, 8)}`

/** A lock client over `backend`, in a fresh namespace. */
export const clientOn = (backend: LockBackend["Service"], options: Lock.LockOptions = {}) =>
  Lock.make({ namespace: namespace("nr"), ...options }).pipe(Effect.provideService(LockBackend, backend))

/**
 * Runs `body` under the lock for `key` in the background and returns once the body is inside: the
 * fiber (its outcome as a `Result`) and whether the body was interrupted.
 */
export const holding = <A, E>(lock: Lock.LockClient<string>, key: string, body: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    let interrupted = false
    const fiber = yield* forkUntilInside((inside) =>
      inside.pipe(
        Effect.andThen(body),
        Effect.onInterrupt(() => Effect.sync(() => (interrupted = true))),
        lock.withLock(key, { waitTimeout: "5 seconds" }),
        Effect.result
      )
    )
    return { fiber, interrupted: () => interrupted }
  })

/** For scripted topologies in tests: releases publish, but nothing subscribes (no wake-ups). */
export const noWakeups = {
  publish: "PUBLISH",
  subscriber: () => Promise.reject(new Error("no wake-ups in this scripted topology"))
} as const
