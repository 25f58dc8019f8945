// Redis 8.0 and Valkey 9.1 (see ServerBinary.newer): the whole lock contract, the semaphore's with
// it, over the node-redis standalone backend. Sentinel and Cluster on these servers are left to the
// runs on Redis 7 and Valkey 8: the scripts and the client are the same.
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { standaloneTarget } from "./targets.ts"

for (const flavor of ServerBinary.flavorsUnderTest(ServerBinary.newer)) {
  LockContract.suite(`${flavor} standalone (node-redis)`, standaloneTarget(flavor))
}
