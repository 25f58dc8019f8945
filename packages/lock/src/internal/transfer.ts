// Handing a held lock to the next fiber of the same client in one round trip (`Backend.transfer`).
//
// When a body ends and another fiber of this client waits for the key, the releasing call asks the
// server to put a token made for that fiber in place of its own (with a fresh lease and a new
// fence) instead of deleting the key. The lock is never free in between, and the next fiber starts
// its body as soon as the reply arrives: one round trip after the previous body, where a release
// followed by a woken acquisition takes a release, a wake-up and an acquisition. That matters most
// when other processes wait too, because every handoff would otherwise cross processes.
//
// The lease of the next fiber counts from the moment the transfer was sent, which is before the
// server set it, exactly as an acquisition's does. A transfer whose outcome is unknown (the reply
// lost after a second of retries) hands the next fiber its token "uncertain": that fiber then
// acquires with it, which is idempotent (it finds its token and re-arms it, or waits as usual), and
// releases it if it gives up. A grant that no fiber can take (every waiter left meanwhile) is
// released at once.
//
// Fairness: a client keeps a key for its own fibers at most `transferStreakLimit` times in a row
// while other clients are registered as waiting for it; the next release then frees the key and
// wakes the longest-waiting registered client, and this client's next fiber queues at the server
// behind it. So a process with many fibers cannot starve another one.
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import type { Backend, LeaseRequest, TransferReply } from "../LockBackend.ts"
import type * as LocalQueue from "./localQueue.ts"
import {
  type Failed,
  notOwner,
  release,
  released,
  type ReleaseOutcome,
  releaseBounded,
  withinReleaseBound
} from "./release.ts"
import { releaseTimeoutMillis, type Settings } from "./settings.ts"
import { withNow } from "./time.ts"

/**
 * How many times in a row a client hands a key to its own next fiber while other clients wait for
 * it: 2, so a process serves at most three of its own calls before the key goes to another process.
 */
export const transferStreakLimit = 2

/** A lock transferred at the server to a token made for the next fiber of this client. */
export interface Grant extends LocalQueue.Grant {
  /** The token the key was transferred to. */
  readonly token: string
  /**
   * Monotonic ms at which the transfer that set it was sent (the grant's lease counts from there),
   * or `undefined` when its outcome is unknown: the key may or may not hold `token`.
   */
  readonly sentAt: number | undefined
  /** The grant's fencing token (0 when uncertain). */
  readonly fence: number
}

export interface HandOnParams {
  readonly backend: Backend
  readonly transfer: NonNullable<Backend["transfer"]>
  readonly settings: Settings
  readonly queue: LocalQueue.LocalQueue<Grant>
  readonly key: string
  /** The releasing call's token. */
  readonly token: string
  /** The releasing call's fencing token, when known (see `lapsed`). */
  readonly fence: number | undefined
  readonly waiterId: string
  readonly passTurn: LocalQueue.PassTurn<Grant>
  /** Makes the successor's token. */
  readonly newToken: () => string
}

/**
 * Whether a releasing call of this client should hand the key to its next fiber (over a backend
 * that can): one waits, and the client has not yet kept the key too often in a row.
 */
export const mayTransfer = (queue: LocalQueue.LocalQueue<Grant>, key: string): boolean =>
  queue.hasWaiters(key) && queue.streak(key) < transferStreakLimit

/**
 * Transfers the key from the releasing call to the next fiber of the client that waits for it,
 * within the release's one-second bound, and hands that fiber the turn with the grant. Reports the
 * releasing call's outcome as a release would: `Released` (its lock went on to the next fiber),
 * `NotOwner` (it had lost the lock: the next fiber acquires as usual), or `Failed`.
 */
export const handOn = (params: HandOnParams): Effect.Effect<ReleaseOutcome> =>
  Effect.suspend(() => {
    const { backend, settings, queue, key } = params
    const successorToken = params.newToken()
    let sentAt = 0
    let firstSentAt: number | undefined
    const waiter = { id: params.waiterId, ttlMillis: 0 }
    const transfer = (timeoutMillis: number) =>
      withNow((now) => {
        // The lease of a retried transfer counts from the retry: the script re-arms it.
        sentAt = now
        firstSentAt ??= now
        return params.transfer({
          key,
          token: params.token,
          successorToken,
          leaseMillis: settings.leaseMillis,
          timeoutMillis,
          acknowledge: settings.replicaAcknowledgement,
          waiter
        })
      })
    // One bound for the whole hand-on: the transfer, and the release of a grant nobody took.
    let deadline = 0
    const bounded = withNow((now) => {
      deadline = now + releaseTimeoutMillis
      return withinReleaseBound(transfer, identity, deadline)
    })
    return Effect.flatMap(bounded, (reply: TransferReply | Failed) => {
      if (reply._tag === "NotOwner") {
        return withNow((receivedAt) =>
          Effect.map(lapsed(params, deadline, firstSentAt ?? sentAt, sentAt, receivedAt), (outcome) => {
            queue.setStreak(key, 0)
            params.passTurn()
            return outcome
          })
        )
      }
      const transferred = reply._tag === "Transferred"
      if (transferred) queue.setStreak(key, reply.othersWaiting ? queue.streak(key) + 1 : 0)
      const grant: Grant = {
        token: successorToken,
        sentAt: transferred ? sentAt : undefined,
        fence: transferred ? reply.fence : 0,
        claimed: false
      }
      const outcome: ReleaseOutcome = transferred ? released : reply
      if (params.passTurn(grant)) return Effect.succeed(outcome)
      // Every waiter left while the transfer was under way: nobody takes the grant.
      return Effect.as(abandon(backend, settings, key, grant, deadline), outcome)
    })
  })

/**
 * After a transfer found the key not ours: asks, with a release carrying the releasing call's fence
 * (within what is left of the bound), whether the key is merely gone with no grant since (the lease
 * ran out, nobody took it), which the lock may then not count as a loss (see `Gone`). The next fiber
 * is handed its turn only after this, so its own acquisition cannot come between. Without a fence,
 * or when the release says otherwise or fails, the outcome is `NotOwner`.
 */
const lapsed = (
  params: HandOnParams,
  deadline: number,
  startedAt: number,
  sentAt: number,
  receivedAt: number
): Effect.Effect<ReleaseOutcome> => {
  const { backend, settings, key, token, fence } = params
  const lost = notOwner(startedAt, sentAt)
  if (fence === undefined) return Effect.succeed(lost)
  const check = release(
    backend,
    (timeoutMillis): LeaseRequest => ({
      key,
      token,
      leaseMillis: settings.leaseMillis,
      timeoutMillis,
      acknowledge: false,
      fence
    }),
    deadline,
    fence
  )
  return Effect.map(check, (outcome) => (outcome._tag === "Gone" ? { _tag: "Gone", startedAt, receivedAt } : lost))
}

/**
 * Releases a grant no fiber took (bounded, never failing): within a second, or until `deadline`
 * (monotonic ms) when it ends a longer release.
 */
export const abandon = (
  backend: Backend,
  settings: Settings,
  key: string,
  grant: Grant,
  deadline?: number
): Effect.Effect<void> =>
  releaseBounded(
    backend,
    (timeoutMillis): LeaseRequest => ({
      key,
      token: grant.token,
      leaseMillis: settings.leaseMillis,
      timeoutMillis,
      acknowledge: false
    }),
    "a transfer no fiber took",
    deadline
  )
