// redlock 5 and its maintained fork @sesamecare-oss/redlock (same API) on one ioredis client, used as
// their READMEs show: `using(resources, duration, settings, routine)`, which acquires, extends the lock
// automatically (when `automaticExtensionThreshold`, default 500 ms, is left before expiry) and releases.
// Loss shows as an aborted signal in the routine, or as a failed release. The one setting changed from
// the defaults is the retry pace: 10 ms +- 5 ms instead of 200 ms +- 100 ms, so that every polling
// library waits at about the same pace (the baseline polls every 5-10 ms, redis-semaphore every 10 ms).
import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock"
import type { Redis } from "ioredis"
import Redlock from "redlock"
import type { Outcome, PromiseLock } from "./drivers.ts"
import { connect } from "./ioredis.ts"

const retryDelay = 10
const retryJitter = 5

/** The part of the API both packages share. */
interface Using {
  using<T>(
    resources: Array<string>,
    duration: number,
    settings: { readonly retryCount: number },
    routine: (signal: AbortSignal) => Promise<T>
  ): Promise<T>
  on(event: "error", listener: (error: unknown) => void): unknown
}

const adapt = (redlock: Using, client: Redis, leaseMillis: number): PromiseLock => {
  // Every failed attempt on a busy key is also emitted as an "error" event; an emitter without a
  // listener would throw it.
  redlock.on("error", () => {})
  const withLock = async (key: string, waitMillis: number, body: () => Promise<void>): Promise<Outcome> => {
    let entered = false
    let aborted = false
    try {
      await redlock.using([key], leaseMillis, { retryCount: Math.floor(waitMillis / retryDelay) }, async (signal) => {
        entered = true
        await body()
        aborted = signal.aborted
      })
    } catch (error) {
      // Before the routine: the retries ran out on a busy key. After it: the release found the key gone.
      if (entered) return "lost"
      if (error instanceof Error && error.name === "ExecutionError") return "timeout"
      throw error
    }
    return aborted ? "lost" : "ok"
  }
  return {
    withLock,
    close: async () => {
      await client.quit()
    }
  }
}

export const makeRedlock = async (url: string, leaseMillis: number): Promise<PromiseLock> => {
  const client = await connect(url)
  return adapt(new Redlock([client], { retryDelay, retryJitter }) as unknown as Using, client, leaseMillis)
}

export const makeSesame = async (url: string, leaseMillis: number): Promise<PromiseLock> => {
  const client = await connect(url)
  return adapt(new SesameRedlock([client], { retryDelay, retryJitter }) as unknown as Using, client, leaseMillis)
}
