// The Sentinel topology: a node-redis Sentinel client follows the master through failovers and
// lists the replicas the sentinels consider healthy; lock operations go to that master on
// dedicated connections.
import * as Effect from "effect/Effect"
import { RedisError } from "@sage/lock/LockError"
import { createSentinel, type RedisSentinelOptions } from "redis"
import type * as Scope from "effect/Scope"
import * as Address from "./address.ts"
import type { Topology } from "./replicated.ts"
import { connectScoped } from "./scopedClient.ts"

type Sentinel = ReturnType<typeof createSentinel>

const noMaster = (name: string): RedisError =>
  new RedisError({
    command: "route",
    kind: "server",
    code: "MASTERDOWN",
    reply: `the sentinels know no master for ${name} right now`,
    retryable: true,
    mayHaveExecuted: false
  })

/** Connects the sentinel client (bounded) and closes it with the scope. */
export const connect = (
  options: RedisSentinelOptions,
  timeoutMillis: number
): Effect.Effect<Sentinel, RedisError, Scope.Scope> =>
  // One replica connection per replica keeps the replica list current; one master connection
  // serves the topology client itself (lock operations use the dedicated pool).
  connectScoped(
    "sentinel",
    () => createSentinel({ masterPoolSize: 1, replicaPoolSize: 1, ...options }) as Sentinel,
    timeoutMillis
  )

export const topology = (sentinel: Sentinel, name: string): Topology => ({
  description: "node-redis sentinel",
  publish: "PUBLISH",
  subscriber: () =>
    Promise.resolve({
      subscribe: (channel, listener) => sentinel.subscribe(channel, listener),
      unsubscribe: (channel) => sentinel.unsubscribe(channel)
    }),
  route: () =>
    Effect.suspend(() => {
      const master = sentinel.getMasterNode()
      if (master === undefined) return Effect.fail(noMaster(name))
      return Effect.succeed({ address: Address.format(master), replicas: sentinel.getReplicaNodes().size })
    }),
  isMaster: (_key, address) => {
    const master = sentinel.getMasterNode()
    return master !== undefined && Address.format(master) === address
  },
  // The client re-reads the sentinels on +switch-master and on its own connection errors; a cheap
  // command through it surfaces a changed master sooner.
  // In the background, like the Cluster refresh: it must never hold up the caller.
  refresh: () =>
    Effect.asVoid(
      Effect.forkDetach(
        Effect.tryPromise(() => sentinel.sendCommand(false, ["PING"], { timeout: 1_000 })).pipe(
          Effect.timeoutOption(1_000),
          Effect.ignore
        )
      )
    )
})
