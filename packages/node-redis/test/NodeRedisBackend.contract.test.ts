// The lock contract over the node-redis standalone backend, once per server flavor (Redis 7 and
// Valkey 8 unless SAGE_TEST_FLAVORS narrows it; a missing binary fails the run, never skips it).
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { standaloneTarget } from "./targets.ts"

for (const flavor of ServerBinary.flavorsUnderTest()) {
  LockContract.suite(`${flavor} standalone (node-redis)`, standaloneTarget(flavor))
}
