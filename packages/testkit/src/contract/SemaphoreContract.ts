/**
 * The semaphore's and read-write lock's contract as a suite of its own, for a deployment that runs
 * them without the rest of the lock's contract (`LockContract.suite` includes it).
 *
 * @example
 * ```ts
 * import type * as Layer from "effect/Layer"
 * import type { LockBackend } from "@sage/lock/LockBackend"
 * import * as SemaphoreContract from "@sage/lock-testkit/contract/SemaphoreContract"
 * import type { ServerControl } from "@sage/lock-testkit/contract/ServerControl"
 *
 * declare const targetLayer: Layer.Layer<LockBackend | ServerControl>
 * SemaphoreContract.suite("valkey9 standalone", targetLayer)
 * ```
 *
 * @since 0.3.0
 */
import { layer } from "@effect/vitest"
import type * as Layer from "effect/Layer"
import type { LockBackend } from "@sage/lock/LockBackend"
import { semaphore } from "./semaphore.ts"
import type { ServerControl } from "./ServerControl.ts"

/**
 * Registers the semaphore contract for one deployment; the layer is built once for the block.
 *
 * @category testing
 * @since 0.3.0
 */
export const suite = <E>(name: string, target: Layer.Layer<LockBackend | ServerControl, E>): void =>
  layer(target, { excludeTestServices: true, timeout: "60 seconds" })(`semaphore contract: ${name}`, (it) => {
    semaphore(it)
  })
