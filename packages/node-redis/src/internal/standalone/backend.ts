// The standalone backend: node-redis clients whose pipelined connections carry every lock operation
// (each is a single script, so none needs a dedicated connection), each lock key always on the same
// one. Two by default: while the server runs one connection's scripts, the client prepares the
// other's. The clients live as long as the layer, reconnect with a short capped backoff, and never
// throw socket errors. The same backend runs over Effect's `Redis` service (`backendOver`).
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend, LeaseRequest, RenewReply } from "@sage/lock/LockBackend"
import type { SharedClient, SubscriberClient } from "../connection/clients.ts"
import { runScript, scriptsOver, type Send, sendOver } from "../connection/commands.ts"
import { laneOf } from "../connection/lane.ts"
import { destroyForGood } from "../connection/teardown.ts"
import { isReleased, parseTransfer, readAcquire, unexpected } from "../replies.ts"
import * as Scripts from "../scripts.ts"
import * as Elections from "../election/elections.ts"
import type { Subscriber } from "../wakeups/subscriber.ts"
import * as Wakeups from "../wakeups/wakeups.ts"

/** At most this many leases go into one `renewAll` script: a long script blocks the server. */
export const renewChunk = 500

const sendOn = (client: SharedClient): Send => sendOver(client)

/**
 * The backend over connected standalone clients: every operation is one script on the pipelined
 * connection of its lock (a lock's commands always use the same client, so they stay in order);
 * wake-ups use one more connection, a subscriber opened the first time a lock is waited for, and
 * closed with the scope.
 */
export const fromClients = (
  clients: readonly [SharedClient, ...Array<SharedClient>],
  description: string
): Effect.Effect<Backend, never, Scope.Scope> =>
  Effect.gen(function* () {
    const [first, ...others] = clients
    return yield* backendOver({
      description,
      sends: [sendOn(first), ...others.map(sendOn)],
      subscriber: yield* duplicateSubscriber(first),
      // A node-redis client sends its commands on one connection, in the order they are sent.
      ordered: true
    })
  })

/**
 * Wake-ups on one duplicate of `client`, the lock's own: connected on first use, every channel on
 * it, closed with the scope. A duplicate that went silent is discarded, and the next call opens
 * another.
 */
export const duplicateSubscriber = (
  client: Pick<SharedClient, "duplicate">
): Effect.Effect<() => Promise<Subscriber>, never, Scope.Scope> =>
  Effect.gen(function* () {
    let subscriber: SubscriberClient | undefined
    yield* Effect.addFinalizer(() =>
      subscriber === undefined
        ? Effect.void
        : Effect.promise(() => subscriber!.close()).pipe(
            Effect.timeoutOption(1_000),
            Effect.ensuring(Effect.sync(() => subscriber !== undefined && destroyForGood(subscriber))),
            Effect.ignore
          )
    )
    return async () => {
      const duplicate = client.duplicate()
      duplicate.on("error", () => {})
      subscriber = duplicate
      await duplicate.connect().catch((error: unknown) => {
        destroyForGood(duplicate)
        throw error
      })
      return {
        subscribe: (channel, listener) => duplicate.subscribe(channel, listener),
        unsubscribe: (channel) => duplicate.unsubscribe(channel),
        probed: () => duplicate,
        discard: (silent) => {
          if (silent !== duplicate) return false
          destroyForGood(duplicate)
          return true
        }
      }
    }
  })

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
