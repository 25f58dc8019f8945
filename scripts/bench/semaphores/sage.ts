// @sage/lock's `Semaphore` in the semaphores bench, through its public API only: `Semaphore.layer` over
// `NodeRedisBackend.layer`, run by a `ManagedRuntime`, and `withPermits(key, { limit, waitTimeout })`
// for one permit, inside the peers bench's Effect workloads (peers/sage.ts), so its loops are the
// lock's line for line. A loss is a `LockLost` failure, as for the lock.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Semaphore } from "@sage/lock"
import type { Runner } from "../peers/drivers.ts"
import { backend, makeWith } from "../peers/sage.ts"

/** One namespace for every process: processes that share a key must share it, or they would not contend. */
const namespace = "semaphores"

/** The workloads on one `Semaphore` client, each call taking one permit of the workload's `limit`. */
export const make = (url: string, leaseMillis: number): Promise<Runner> =>
  makeWith(Semaphore.layer({ namespace, leaseDuration: leaseMillis }).pipe(Layer.provide(backend(url))), (workload) =>
    Effect.map(Semaphore.Semaphore, (semaphores) => ({
      withLock: (key, options) =>
        semaphores.withPermits(key, { limit: workload.limit ?? 1, waitTimeout: options.waitTimeout })
    }))
  )
