// redis-semaphore's `Mutex` on one ioredis client, with its defaults except the lease: a new Mutex per
// call (its README's pattern), `acquire()` polling `SET NX PX` every `retryInterval` (default 10 ms)
// until `acquireTimeout`, a refresh timer every `refreshInterval` (default 0.8 x lockTimeout) while
// held, and `release()`. Loss shows through the `onLockLost` callback (a refresh that found the key gone).
// `makeWith` drives any of the library's classes the same way (the semaphores bench's `Semaphore`
// and `MultiSemaphore`).
import { type LockOptions, Mutex, TimeoutError } from "redis-semaphore"
import type { Redis } from "ioredis"
import type { Outcome, PromiseLock } from "./drivers.ts"
import { connect } from "./ioredis.ts"

/** What the driver needs of a redis-semaphore object (`Mutex`, `Semaphore`, `MultiSemaphore`). */
export interface Acquirable {
  readonly acquire: () => Promise<void>
  readonly release: () => Promise<void>
}

/** A `PromiseLock` that builds `create(client, key, options)` for every call. */
export const makeWith = async (
  url: string,
  leaseMillis: number,
  create: (client: Redis, key: string, options: LockOptions) => Acquirable
): Promise<PromiseLock> => {
  const client = await connect(url)
  const withLock = async (key: string, waitMillis: number, body: () => Promise<void>): Promise<Outcome> => {
    let lost = false
    const held = create(client, key, {
      lockTimeout: leaseMillis,
      acquireTimeout: Math.max(1, Math.floor(waitMillis)),
      onLockLost: () => {
        lost = true
      }
    })
    try {
      await held.acquire()
    } catch (error) {
      if (error instanceof TimeoutError) return "timeout"
      throw error
    }
    try {
      await body()
    } finally {
      await held.release()
    }
    return lost ? "lost" : "ok"
  }
  return {
    withLock,
    close: async () => {
      await client.quit()
    }
  }
}

export const make = (url: string, leaseMillis: number): Promise<PromiseLock> =>
  makeWith(url, leaseMillis, (client, key, options) => new Mutex(client, key, options))
