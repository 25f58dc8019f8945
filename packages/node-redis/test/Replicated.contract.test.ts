// The same lock contract over Sentinel and Cluster, on Redis 7 and Valkey 8: the Lock does not
// change shape, only the backend layer does.
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { clusterTarget, sentinelTarget } from "./targets.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  LockContract.suite(`${flavor} sentinel (node-redis)`, sentinelTarget(flavor))
  LockContract.suite(`${flavor} cluster (node-redis)`, clusterTarget(flavor))
}
