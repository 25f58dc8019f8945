// Redis 8.0 and Valkey 9.1 (see ServerBinary.newer) over ioredis through Sentinel and Cluster: the
// semaphore's and read-write lock's part of the contract (where the servers differ: hash-field
// expiry), as the node-redis backends run it there. The whole contract runs on these servers over
// ioredis standalone (IoredisBackend.contract.test.ts), and over Sentinel and Cluster on Redis 7 and
// Valkey 8.
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { clusterTarget, sentinelTarget, sharedClusterTarget, sharedSentinelTarget } from "./targets.ts"

ServerBinary.flavorsUnderTest(ServerBinary.newer).forEach((flavor, i) => {
  // Each server once with the backend's own connections and once with the application's client.
  LockContract.semaphoreSuite(
    `${flavor} sentinel (ioredis${i % 2 === 0 ? "" : ", shared client"})`,
    i % 2 === 0 ? sentinelTarget(flavor) : sharedSentinelTarget(flavor)
  )
  LockContract.semaphoreSuite(
    `${flavor} cluster (ioredis${i % 2 === 0 ? ", shared client" : ""})`,
    i % 2 === 0 ? sharedClusterTarget(flavor) : clusterTarget(flavor)
  )
})
