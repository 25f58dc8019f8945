// The lock's contract, the semaphore's and the election's with it, over ioredis on every server the
// test kit has: over the backend's own connections and over a client the application owns.
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import { ServerBinary } from "@sage/lock-testkit"
import { ownTarget, sharedTarget } from "./targets.ts"

const flavors = [...ServerBinary.flavorsUnderTest(), ...ServerBinary.flavorsUnderTest(ServerBinary.newer)]

flavors.forEach((flavor, i) => {
  // Each server once, alternating how the backend gets its connections, so both ways meet a Redis
  // and a Valkey.
  if (i % 2 === 0) LockContract.suite(`${flavor} standalone (ioredis)`, ownTarget(flavor))
  else LockContract.suite(`${flavor} standalone (ioredis, shared client)`, sharedTarget(flavor))
})
