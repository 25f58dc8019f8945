// Redis 8.0 and Valkey 9.1 (see ServerBinary.newer): the whole lock contract, the semaphore's with
// it, over the node-redis standalone backend, and the semaphore's and read-write lock's part over
// Sentinel and Cluster. The lock's own Sentinel and Cluster runs are on Redis 7 and Valkey 8
// (Replicated.contract.test.ts): its scripts and the client are the same on every server.
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { clusterTarget, sentinelTarget, standaloneTarget } from "./targets.ts"

for (const flavor of ServerBinary.flavorsUnderTest(ServerBinary.newer)) {
  LockContract.suite(`${flavor} standalone (node-redis)`, standaloneTarget(flavor))
  LockContract.semaphoreSuite(`${flavor} sentinel (node-redis)`, sentinelTarget(flavor))
  LockContract.semaphoreSuite(`${flavor} cluster (node-redis)`, clusterTarget(flavor))
}
