// The lock's contract, the semaphore's and the election's with it, over ioredis on a three-master
// Cluster of Redis 7 and of Valkey 8: over a cluster client of the backend's own, and over one the
// application owns.
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { clusterTarget, sharedClusterTarget } from "./targets.ts"

ServerBinary.flavorsUnderTest().forEach((flavor, i) => {
  // Each server once, alternating how the backend gets its cluster client, so both ways meet a Redis
  // and a Valkey.
  if (i % 2 === 0) LockContract.suite(`${flavor} cluster (ioredis)`, clusterTarget(flavor))
  else LockContract.suite(`${flavor} cluster (ioredis, shared client)`, sharedClusterTarget(flavor))
})
