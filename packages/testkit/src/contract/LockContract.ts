/**
 * The lock's behavioural contract as one suite, run unchanged against every backend and server, with
 * the semaphore's and the election's beside it (over the same backend).
 *
 * A backend's test file provides a layer with the `LockBackend` under test and a `ServerControl`
 * for the same deployment, and calls `suite`. Facts that only one topology can show live beside the
 * call, not here.
 *
 * @example
 * ```ts
 * import type * as Layer from "effect/Layer"
 * import type { LockBackend } from "@sage/lock/LockBackend"
 * import * as LockContract from "@sage/lock-testkit/contract/LockContract"
 * import type { ServerControl } from "@sage/lock-testkit/contract/ServerControl"
 *
 * declare const targetLayer: Layer.Layer<LockBackend | ServerControl>
 * LockContract.suite("redis7 standalone", targetLayer)
 * ```
 *
 * @since 0.1.0
 * @module @sage/lock-testkit/contract/LockContract
 */
import { layer } from "@effect/vitest"
import type * as Layer from "effect/Layer"
import type { LockBackend } from "@sage/lock/LockBackend"
import { acquisition } from "./acquisition.ts"
import { election } from "./election.ts"
import { holding } from "./holding.ts"
import { lease } from "./lease.ts"
import { semaphore } from "./semaphore.ts"
import type { ServerControl } from "./ServerControl.ts"
import type { Reach } from "./support.ts"

/**
 * Options of the suites.
 *
 * @category models
 * @since 0.2.1
 */
export interface SuiteOptions {
  /**
   * What the target's `ServerControl` can do (see `Reach`): `"server"` (the default) runs every test,
   * `"keys"` leaves out those that send raw commands or pause the server, `"backend"` runs only the
   * tests that need no control at all.
   */
  readonly reach?: Reach | undefined
}

/**
 * Registers the whole contract suite for one deployment. The layer is built once for the block and
 * released after it; the tests run on the live clock.
 *
 * @category testing
 * @since 0.1.0
 */
export const suite = <E>(
  name: string,
  target: Layer.Layer<LockBackend | ServerControl, E>,
  options: SuiteOptions = {}
): void => {
  const reach = options.reach ?? "server"
  layer(target, { excludeTestServices: true, timeout: "60 seconds" })(`lock contract: ${name}`, (it) => {
    acquisition(it, reach)
    holding(it, reach)
    lease(it, reach)
    semaphore(it, reach)
    election(it, reach)
  })
}

/**
 * Registers the semaphore's and the read-write lock's part of the contract alone, for a deployment
 * whose lock runs the whole suite elsewhere (the same backend over another server, say).
 *
 * @example
 * ```ts
 * import type * as Layer from "effect/Layer"
 * import type { LockBackend } from "@sage/lock/LockBackend"
 * import * as LockContract from "@sage/lock-testkit/contract/LockContract"
 * import type { ServerControl } from "@sage/lock-testkit/contract/ServerControl"
 *
 * declare const targetLayer: Layer.Layer<LockBackend | ServerControl>
 * LockContract.semaphoreSuite("valkey9 cluster", targetLayer)
 * ```
 *
 * @category testing
 * @since 0.2.1
 */
export const semaphoreSuite = <E>(
  name: string,
  target: Layer.Layer<LockBackend | ServerControl, E>,
  options: SuiteOptions = {}
): void =>
  layer(target, { excludeTestServices: true, timeout: "60 seconds" })(`semaphore contract: ${name}`, (it) => {
    semaphore(it, options.reach ?? "server")
  })
