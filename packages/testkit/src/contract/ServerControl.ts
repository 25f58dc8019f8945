/**
 * What the lock contract suite needs to observe and disturb the deployment under test, independent
 * of how that deployment was started: raw key access (to inspect, steal or delete a lock), raw
 * commands (CONFIG SET, CLIENT PAUSE, ...), and freezing the server process.
 *
 * @since 0.1.0
 * @module @sage/lock-testkit/contract/ServerControl
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as MemoryBackend from "@sage/lock/MemoryBackend"
import type * as RedisServer from "../RedisServer.ts"

/**
 * @category models
 * @since 0.1.0
 */
export interface Control {
  /** A short label for the deployment, e.g. `"redis7 standalone"`. */
  readonly label: string
  /** `GET key`, or `null` when absent. */
  readonly get: (key: string) => Effect.Effect<string | null>
  /** `SET key value [PX ms]`. */
  readonly set: (key: string, value: string, pxMillis?: number) => Effect.Effect<void>
  /** `DEL key`. */
  readonly del: (key: string) => Effect.Effect<void>
  /** `PTTL key`. */
  readonly pttl: (key: string) => Effect.Effect<number>
  /** Any command on the node that owns `key` (or the only node); the reply as node-redis gives it. */
  readonly command: (key: string, ...args: ReadonlyArray<string>) => Effect.Effect<unknown>
  /** Freezes (SIGSTOP) the node that owns `key`. */
  readonly pause: (key: string) => Effect.Effect<void>
  /** Resumes (SIGCONT) a frozen node. */
  readonly resume: (key: string) => Effect.Effect<void>
}

/**
 * @category services
 * @since 0.1.0
 */
export class ServerControl extends Context.Service<ServerControl, Control>()("@sage/lock-testkit/ServerControl") {}

/**
 * The control of a deployment, given how to find the node that owns a key (the only node, the
 * Sentinel master, the Cluster master of the key's slot).
 *
 * @category constructors
 * @since 0.2.1
 */
export const via = (label: string, nodeFor: (key: string) => Effect.Effect<RedisServer.RedisServer>): Control => {
  const on = <A>(key: string, f: (server: RedisServer.RedisServer) => Effect.Effect<A, unknown>) =>
    Effect.orDie(Effect.flatMap(nodeFor(key), f))
  return {
    label,
    get: (key) =>
      on(key, (server) => server.command("GET", key)).pipe(Effect.map((r) => (r === null ? null : String(r)))),
    set: (key, value, pxMillis) =>
      on(key, (server) =>
        pxMillis === undefined
          ? server.command("SET", key, value)
          : server.command("SET", key, value, "PX", String(pxMillis))
      ).pipe(Effect.asVoid),
    del: (key) => on(key, (server) => server.command("DEL", key)).pipe(Effect.asVoid),
    pttl: (key) => on(key, (server) => server.command("PTTL", key)).pipe(Effect.map(Number)),
    command: (key, ...args) => on(key, (server) => server.command(...args)),
    pause: (key) => on(key, (server) => server.pause),
    resume: (key) => on(key, (server) => server.resume)
  }
}

/**
 * The control of one standalone server.
 *
 * @category constructors
 * @since 0.2.1
 */
export const ofServer = (server: RedisServer.RedisServer): Control =>
  via(`${server.flavor} standalone`, () => Effect.succeed(server))

/**
 * The control of a deployment that can be reached only by key (an in-memory backend's `Keys`): raw
 * commands and pausing end the test with a defect naming what it needed. Run the suites over it with
 * `reach: "keys"`, which leaves those tests out.
 *
 * @example
 * ```ts
 * import * as Context from "effect/Context"
 * import * as Effect from "effect/Effect"
 * import * as Layer from "effect/Layer"
 * import * as MemoryBackend from "@sage/lock/MemoryBackend"
 * import { LockBackend } from "@sage/lock/LockBackend"
 * import * as LockContract from "@sage/lock-testkit/contract/LockContract"
 * import * as ServerControl from "@sage/lock-testkit/contract/ServerControl"
 *
 * const memory = Layer.effectContext(
 *   Effect.map(MemoryBackend.makeWithKeys, ({ backend, keys }) =>
 *     Context.make(LockBackend, backend).pipe(
 *       Context.add(ServerControl.ServerControl, ServerControl.ofKeys("in-memory", keys))
 *     )
 *   )
 * )
 * LockContract.suite("in-memory", memory, { reach: "keys" })
 * ```
 *
 * @category constructors
 * @since 0.2.1
 */
export const ofKeys = (label: string, keys: MemoryBackend.Keys): Control => {
  const unreachable = (what: string) => Effect.die(new Error(`${label} has no server: ${what} needs reach "server"`))
  return {
    label,
    get: keys.get,
    set: keys.set,
    del: keys.del,
    pttl: keys.pttl,
    command: (_key, ...args) => unreachable(args.join(" ")),
    pause: () => unreachable("pausing the server"),
    resume: () => unreachable("resuming the server")
  }
}
