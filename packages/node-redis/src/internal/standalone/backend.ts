// The standalone backend over node-redis clients, whose pipelined connections carry every lock
// operation (each is a single script, so none needs a dedicated connection), each lock key always on
// the same one. Two by default: while the server runs one connection's scripts, the client prepares
// the other's. The clients live as long as the layer, reconnect with a short capped backoff, and
// never throw socket errors. The backend itself is commandBackend.ts, which knows no client.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Backend } from "@sage/lock/LockBackend"
import type { SharedClient, SubscriberClient } from "../connection/clients.ts"
import { classify } from "../connection/classify.ts"
import { type Send, sendOver } from "../connection/commands.ts"
import { destroyForGood } from "../connection/teardown.ts"
import type { Subscriber } from "../wakeups/subscriber.ts"
import { backendOver } from "./commandBackend.ts"

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
      classify,
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
