// How a process of the election demo reaches the deployment: the lock backend its election client
// runs on, and a plain node-redis client of its own for the data the leaders write (fenced writes)
// and for reading the election's lock from outside (`LockAdmin`). Standalone, Cluster or Sentinel,
// as the parent started it.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { FencedWrite, LockAdmin } from "@sage/lock-node-redis"
import { createClient, createCluster, createSentinel } from "redis"
import { type Connection, describeConnection } from "../protocol.ts"

export { backendLayer } from "../backendLayer.ts"

export class ConnectError extends Data.TaggedError("ConnectError")<{ readonly message: string }> {}

/** A plain client: fenced writes to one key (routed by it on a Cluster) and the admin functions. */
export interface Store {
  /** Sends commands for `key`: to its slot's master on a Cluster, to the master otherwise. */
  readonly fenced: (key: string) => FencedWrite.Client
  readonly admin: LockAdmin.Client
}

interface Opened {
  readonly store: Store
  readonly connect: () => Promise<unknown>
  readonly close: () => Promise<unknown>
}

// Errors surface through the rejected commands; the listener keeps them from crashing the process.
const quiet = () => {}

const open = (connection: Connection): Opened => {
  switch (connection._tag) {
    case "standalone": {
      const client = createClient({ url: connection.url })
      client.on("error", quiet)
      return {
        store: { fenced: () => client, admin: client },
        connect: () => client.connect(),
        close: () => client.close()
      }
    }
    case "cluster": {
      const client = createCluster({ rootNodes: connection.rootUrls.map((url) => ({ url })) })
      client.on("error", quiet)
      return {
        store: {
          fenced: (key) => ({ sendCommand: (args, options) => client.sendCommand(key, false, args, options) }),
          admin: client
        },
        connect: () => client.connect(),
        close: () => client.close()
      }
    }
    case "sentinel": {
      const client = createSentinel({
        name: connection.masterName,
        sentinelRootNodes: connection.sentinels.map(({ host, port }) => ({ host, port }))
      })
      client.on("error", quiet)
      return {
        store: {
          fenced: () => ({ sendCommand: (args, options) => client.sendCommand(false, args, options) }),
          admin: client
        },
        connect: () => client.connect(),
        close: () => client.close()
      }
    }
  }
}

/** Connects a plain client; it is closed with the scope. */
export const connect = (connection: Connection): Effect.Effect<Store, ConnectError, Scope.Scope> =>
  Effect.gen(function* () {
    const opened = yield* Effect.acquireRelease(
      Effect.sync(() => open(connection)),
      (opened) =>
        Effect.promise(() => Promise.resolve().then(opened.close).catch(quiet)).pipe(Effect.timeoutOption(2_000))
    )
    yield* Effect.tryPromise({
      try: opened.connect,
      catch: (cause) =>
        new ConnectError({
          message: `${describeConnection(connection)}: ${cause instanceof Error ? cause.message : String(cause)}`
        })
    }).pipe(
      Effect.timeoutOrElse({
        duration: 15_000,
        orElse: () => Effect.fail(new ConnectError({ message: `${describeConnection(connection)}: no answer in 15 s` }))
      })
    )
    return opened.store
  })
