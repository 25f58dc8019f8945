// The elections of `MemoryBackend`: what `ElectionScripts` keeps on a server, a leader record per
// election (by its lock key) that counts while its term still holds the lock, kept in a map and
// timed by the backend's clock.
import * as Effect from "effect/Effect"
import { recordRetentionMillis } from "../ElectionScripts.ts"
import type { Elections, ElectionView, LeaderRecord } from "../LockBackend.ts"

/** What the elections read from the backend's locks. */
export interface Hooks {
  /** The backend's clock, as its scripts read the server's `TIME` (milliseconds). */
  readonly now: Effect.Effect<number>
  /** Whether a live lease holds the lock `key` at `now`. */
  readonly held: (key: string, now: number) => boolean
  /** The last fencing token issued for `key` (0 once its record is gone): the current term. */
  readonly lastFence: (key: string, now: number) => number
  /** Tells the election's observers that its leader changed. */
  readonly announce: (key: string) => void
}

/** `Backend.elections` over the backend's locks. */
export const memoryElections = (hooks: Hooks): Elections => {
  const records = new Map<string, { readonly record: LeaderRecord; readonly expiresAt: number }>()
  const recordOf = (key: string, now: number): LeaderRecord | undefined => {
    const kept = records.get(key)
    if (kept === undefined) return undefined
    if (kept.expiresAt > now) return kept.record
    records.delete(key)
    return undefined
  }
  return {
    proclaim: (request) =>
      Effect.map(hooks.now, (now) => {
        if (!hooks.held(request.key, now) || hooks.lastFence(request.key, now) !== request.term) return false
        const previous = recordOf(request.key, now)
        const record: LeaderRecord =
          previous !== undefined && previous.term === request.term
            ? { ...previous, value: request.value, revision: previous.revision + 1 }
            : {
                term: request.term,
                candidate: request.candidate,
                value: request.value,
                since: Math.floor(now),
                revision: 1
              }
        records.set(request.key, { record, expiresAt: now + recordRetentionMillis })
        hooks.announce(request.key)
        return true
      }),
    read: (key) =>
      Effect.map(hooks.now, (now): ElectionView => {
        if (!hooks.held(key, now)) return { _tag: "Vacant" }
        const term = hooks.lastFence(key, now)
        const record = recordOf(key, now)
        return record !== undefined && record.term === term
          ? { _tag: "Leading", record }
          : { _tag: "Unproclaimed", term }
      }),
    announce: (key) => Effect.sync(() => hooks.announce(key))
  }
}
