// The lock's contract, the semaphore's and the election's with it, over ioredis on a Sentinel-managed
// master with two replicas, on Redis 7 and Valkey 8: with the layer's options, and with the options
// of a client the application owns.
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { sentinelTarget, sharedSentinelTarget } from "./targets.ts"

ServerBinary.flavorsUnderTest().forEach((flavor, i) => {
  // Each server once, alternating how the backend gets its options, so both ways meet a Redis and a
  // Valkey.
  if (i % 2 === 0) LockContract.suite(`${flavor} sentinel (ioredis)`, sentinelTarget(flavor))
  else LockContract.suite(`${flavor} sentinel (ioredis, shared client)`, sharedSentinelTarget(flavor))
})
