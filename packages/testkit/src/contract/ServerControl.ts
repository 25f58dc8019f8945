/**
 * What the lock contract suite needs to observe and disturb the deployment under test, independent
 * of how that deployment was started: raw key access (to inspect, steal or delete a lock), raw
 * commands (CONFIG SET, CLIENT PAUSE, ...), and freezing the server process.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"

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
