// The standalone backend over any way of sending one command: each lock operation is one script on
// the connection of its lock (`laneOf`), wake-ups on one subscriber. Nothing here knows a client:
// node-redis's clients (backend.ts), Effect's `Redis` service and ioredis's clients
// (`CommandBackend`) all come through here.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend, LeaseRequest, RenewReply } from "@sage/lock/LockBackend"
import type { Classify } from "../connection/failures.ts"
import { runScript, scriptsOver, type Send } from "../connection/sending.ts"
import { laneOf } from "../connection/lane.ts"
import { isReleased, parseTransfer, readAcquire, unexpected } from "../replies.ts"
import * as Scripts from "../scripts.ts"
import * as Elections from "../election/elections.ts"
import type { Subscriber } from "../wakeups/subscriber.ts"
import * as Wakeups from "../wakeups/wakeups.ts"

/** At most this many leases go into one `renewAll` script: a long script blocks the server. */
export const renewChunk = 500

/**
 * The `renewAll` scripts for leases on one connection: one for its locks and one for its semaphores'
 * permits (pipelined, so still one round trip), with the replies in the order of `requests`.
 */
const renewChunkOf = (send: Send, requests: ReadonlyArray<LeaseRequest>): Effect.Effect<ReadonlyArray<RenewReply>> => {
  const permits = requests.filter((request) => request.permits !== undefined)
  if (permits.length === 0) return renewKindOf(send, requests, Scripts.renewAllArgs)
  if (permits.length === requests.length) return renewKindOf(send, requests, Scripts.semaphoreRenewAllArgs)
  const locks = requests.filter((request) => request.permits === undefined)
  return Effect.map(
    Effect.all(
      [renewKindOf(send, locks, Scripts.renewAllArgs), renewKindOf(send, permits, Scripts.semaphoreRenewAllArgs)],
      { concurrency: "unbounded" }
    ),
    ([lockReplies, permitReplies]) => {
      let l = 0
      let p = 0
      return requests.map((request) => (request.permits === undefined ? lockReplies[l++]! : permitReplies[p++]!))
    }
  )
}

/** One `renewAll` script (made by `argsOf`) for leases of one kind on one connection. */
const renewKindOf = (
  send: Send,
  requests: ReadonlyArray<LeaseRequest>,
  argsOf: typeof Scripts.renewAllArgs
): Effect.Effect<ReadonlyArray<RenewReply>> => {
  const first = requests[0]!
  const keys = requests.map((request) => request.key)
  const tokens = requests.map((request) => request.token)
  return send(argsOf("EVALSHA", keys, tokens, first.leaseMillis), first.timeoutMillis).pipe(
    Effect.catchIf(
      (error) => error.code === "NOSCRIPT",
      () => send(argsOf("EVAL", keys, tokens, first.leaseMillis), first.timeoutMillis)
    ),
    Effect.match({
      onFailure: (error): ReadonlyArray<RenewReply> => requests.map(() => error),
      onSuccess: (reply): ReadonlyArray<RenewReply> =>
        Array.isArray(reply) && reply.length === requests.length
          ? reply.map((one) => one === 1)
          : requests.map(() => unexpected("renewAll", reply))
    })
  )
}

/**
 * The standalone backend over any way of sending one command (node-redis clients, Effect's `Redis`
 * service): each operation is one script. With several `sends` (one per connection), each lock's
 * commands go to the one `laneOf` picks. Without `subscriber` there are no wake-ups, and waiters
 * poll with backoff.
 */
export const backendOver = (options: {
  readonly description: string
  /** One way of sending per connection (at least one). */
  readonly sends: readonly [Send, ...Array<Send>]
  readonly subscriber?: (() => Promise<Subscriber>) | undefined
  /** Reads the subscriber's failures (its client's own errors). */
  readonly classify: Classify
  /** Whether each of `sends` delivers commands in the order it is called (see `Backend.ordered`). */
  readonly ordered?: boolean | undefined
}): Effect.Effect<Backend, never, Scope.Scope> => {
  const { sends } = options
  const sendFor = (lockKey: string): Send => sends[laneOf(lockKey, sends.length)]!
  const leave: Backend["leave"] & {} = (key, waiterId, timeoutMillis, permits) =>
    Effect.ignore(
      runScript(
        sendFor(key),
        Scripts.leaveScript(permits),
        ...Scripts.leaveCall(key, waiterId, "PUBLISH", permits),
        timeoutMillis
      )
    )
  return Effect.gen(function* () {
    const wakeups =
      options.subscriber === undefined
        ? undefined
        : yield* Wakeups.make({
            subscriber: options.subscriber,
            classify: options.classify,
            // One node: a release's grant is as durable as an acquisition.
            grants: true,
            leave
          })
    return {
      description: options.description,
      ordered: options.ordered === true,
      leave,
      acquire: (request) =>
        scriptsOver(sendFor(request.key))(
          Scripts.acquireScript(request),
          ...Scripts.acquireCall(request, "PUBLISH"),
          request.timeoutMillis,
          readAcquire
        ),
      renew: (request) =>
        Effect.map(
          runScript(
            sendFor(request.key),
            Scripts.renewScript(request),
            ...Scripts.renewCall(request),
            request.timeoutMillis
          ),
          (reply) => reply === 1
        ),
      renewAll: (requests) => {
        if (requests.length === 0) return Effect.succeed([])
        // Each lease is renewed on its lock's connection, so a renewal never overtakes that lock's
        // release; replies are put back in the order of `requests`.
        const byLane: Array<Array<number>> = sends.map(() => [])
        requests.forEach((request, index) => byLane[laneOf(request.key, sends.length)]!.push(index))
        const chunks: Array<{ readonly lane: number; readonly indices: ReadonlyArray<number> }> = []
        byLane.forEach((indices, lane) => {
          for (let i = 0; i < indices.length; i += renewChunk)
            chunks.push({ lane, indices: indices.slice(i, i + renewChunk) })
        })
        return Effect.map(
          Effect.forEach(
            chunks,
            ({ indices, lane }) =>
              renewChunkOf(
                sends[lane]!,
                indices.map((index) => requests[index]!)
              ),
            { concurrency: "unbounded" }
          ),
          (replies) => {
            const ordered: Array<RenewReply> = []
            chunks.forEach(({ indices }, chunk) =>
              indices.forEach((index, i) => {
                ordered[index] = replies[chunk]![i]!
              })
            )
            return ordered
          }
        )
      },
      transfer: (request) =>
        Effect.flatMap(
          runScript(sendFor(request.key), Scripts.transfer, ...Scripts.transferCall(request), request.timeoutMillis),
          parseTransfer
        ),
      release: (request) =>
        scriptsOver(sendFor(request.key))(
          Scripts.releaseScript(request),
          ...Scripts.releaseCall(request, "PUBLISH"),
          request.timeoutMillis,
          isReleased
        ),
      check: (request) =>
        Effect.map(
          runScript(
            sendFor(request.key),
            Scripts.checkScript(request),
            ...Scripts.checkCall(request),
            request.timeoutMillis
          ),
          (reply) => typeof reply === "number" && reply !== -2
        ),
      elections: Elections.standalone(sendFor),
      ...(wakeups === undefined ? {} : { wakeups })
    } satisfies Backend
  })
}
