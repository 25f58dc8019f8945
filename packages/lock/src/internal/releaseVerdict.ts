// What a release that followed a body's success means for the call: the body's value, with a
// warning when the release did not go as planned but the body ran within its lease, or `LockLost`
// (phase "release") when the lease was not ours to the end.
import * as Effect from "effect/Effect"
import { LockLost } from "../LockError.ts"
import type { ClientMetrics } from "./metrics.ts"
import type { ReleaseOutcome } from "./release.ts"
import type { Settings } from "./settings.ts"
import { annotate, type CallTrace } from "./tracing.ts"
import type { Warnings } from "./warnings.ts"

/** The parts of a lock client a verdict reports through. */
export interface Reporting {
  readonly settings: Settings
  readonly metrics: ClientMetrics
  readonly warnings: Warnings
}

/**
 * Succeeds (the call returns the body's value) or fails with `LockLost`, given how the release of a
 * lease that could be relied on until `validUntil` (monotonic ms) went; `undefined` when it simply
 * released the lock, so that the usual call pays for no Effect here.
 */
export const releaseVerdict = (
  client: Reporting,
  key: string,
  trace: CallTrace | undefined,
  validUntil: number,
  released: ReleaseOutcome
): Effect.Effect<void, LockLost> | undefined => {
  // A key found not ours by an attempt sent after the lease could have run out on the server, when
  // the release began before that: the body ended within its lease, and the key may just have
  // expired while the release was retried (a grant's short window, a short lease). That says nothing
  // of the time the body ran, so it is not a loss: the lease freed the key.
  if (released._tag === "NotOwner" && released.startedAt < validUntil && released.sentAt >= validUntil) {
    return client.warnings.warn(
      "unconfirmed",
      key,
      `could not confirm the release of lock ${key}: its lease ran out while the release was retried, after the body completed within it`
    )
  }
  // The key was gone, nobody had taken the lock since this lease's grant, and the reply came after
  // the lease could have run out on the server, when the release began before that: the body ended
  // within its lease, and the lease ran out on the way (a release queued behind thousands of
  // others). Nobody else held the lock, so it is not a loss. A key found gone sooner was deleted
  // under a lease that still ran: a loss, reported as one.
  if (released._tag === "Gone" && released.startedAt < validUntil && released.receivedAt >= validUntil) {
    return client.warnings.warn(
      "late",
      key,
      `lock ${key} expired before its release reached the server, after the body completed within its lease; nobody held it in between`
    )
  }
  if (released._tag === "NotOwner" || released._tag === "Gone") {
    annotate(trace, { "lock.outcome": "lost", "lock.lost.phase": "release", "lock.lost.reason": "ownership" })
    return Effect.andThen(
      client.metrics.lost("release"),
      Effect.fail(
        new LockLost({
          key,
          namespace: client.settings.namespace,
          phase: "release",
          reason: "ownership",
          bodyCompleted: true
        })
      )
    )
  }
  if (released._tag === "Failed") {
    const message = `could not release lock ${key} within one second after the body completed; its lease will free it`
    return client.warnings.warn("failed", key, message, released.error)
  }
  return undefined
}
