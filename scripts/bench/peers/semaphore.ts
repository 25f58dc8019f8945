// redis-semaphore's `Mutex` on one ioredis client, with its defaults except the lease: a new Mutex per
// call (its README's pattern), `acquire()` polling `SET NX PX` every `retryInterval` (default 10 ms)
// until `acquireTimeout`, a refresh timer every `refreshInterval` (default 0.8 x lockTimeout) while
// held, and `release()`. Loss shows through the `onLockLost` callback (a refresh that found the key gone).
import { Mutex, TimeoutError } from "redis-semaphore"
import type { Outcome, PromiseLock } from "./drivers.ts"
import { connect } from "./ioredis.ts"

export const make = async (url: string, leaseMillis: number): Promise<PromiseLock> => {
  const client = await connect(url)
  const withLock = async (key: string, waitMillis: number, body: () => Promise<void>): Promise<Outcome> => {
    let lost = false
    const mutex = new Mutex(client, key, {
      lockTimeout: leaseMillis,
      acquireTimeout: Math.max(1, Math.floor(waitMillis)),
      onLockLost: () => {
        lost = true
      }
    })
    try {
      await mutex.acquire()
    } catch (error) {
      if (error instanceof TimeoutError) return "timeout"
      throw error
    }
    try {
      await body()
    } finally {
      await mutex.release()
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
