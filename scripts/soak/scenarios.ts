// The soak's two scenarios, at full size (`npm run soak`) and small (`--quick`, a smoke run):
// - A: many waiters in several processes contending on ONE key, cycling through `waitTimeout`;
// - B: thousands of locks held at once in one process, kept alive by batched renewal.
import type { Load } from "./protocol.ts"

/**
 * Connections one lock client may open on a standalone server: its two command connections (the
 * backend's default `connections`) and its subscriber.
 */
export const connectionsPerProcess = 3

export interface Scenario {
  readonly id: "A" | "B"
  readonly title: string
  readonly workers: number
  readonly leaseMillis: number
  /** What each worker runs. */
  readonly load: Load
}

export interface Plan {
  readonly durationMillis: number
  readonly sampleMillis: number
  readonly scenarios: ReadonlyArray<Scenario>
}

const contention = (workers: number, waiters: number, waitTimeoutMillis: number): Scenario => ({
  id: "A",
  title: `${workers * waiters} waiters in ${workers} processes on one key`,
  workers,
  leaseMillis: 5000,
  load: { _tag: "contend", key: "hot", waiters, waitTimeoutMillis, bodyMinMillis: 1, bodyMaxMillis: 5 }
})

const held = (locks: number, burst: boolean): Scenario => ({
  id: "B",
  title: `${locks} locks held in one process${burst ? ", all acquired at once" : ""}`,
  workers: 1,
  leaseMillis: 3000,
  load: { _tag: "hold", locks, waitTimeoutMillis: 30_000, acquireConcurrency: burst ? 0 : acquireConcurrency }
})

/**
 * Acquisitions under way at once in scenario B (unless `--burst`): the ramp to 10,000 held locks
 * takes about a second, and no acquisition waits behind thousands of others in its own process.
 */
export const acquireConcurrency = 500

/** `burst`: scenario B acquires every lock at once (unbounded concurrency). */
export const fullPlan = (seconds: number, burst = false): Plan => ({
  durationMillis: seconds * 1000,
  sampleMillis: 2000,
  scenarios: [contention(4, 250, 2000), held(10_000, burst)]
})

/**
 * Every code path of the full plan with a tenth of the load, for a smoke run; the shorter
 * `waitTimeout` has the fewer waiters time out as often.
 */
export const quickPlan = (seconds: number, burst = false): Plan => ({
  durationMillis: seconds * 1000,
  sampleMillis: 500,
  scenarios: [contention(2, 50, 300), held(1000, burst)]
})
