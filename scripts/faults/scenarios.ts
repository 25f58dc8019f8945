// The fault matrix's scenarios, in the order the report lists them. Each is written, with the
// verdict it is expected to earn, in the file of its kind: the server's faults (serverFaults.ts), the
// holder's process (holderFaults.ts), the waiting machinery (waiting.ts), the network
// (networkFaults.ts) and replication and failover (failoverFaults.ts). IDs in brackets refer to the
// scenario table of servers-and-faults.md. "exclusion": no two bodies on one key may ever overlap.
// "violation": the fault breaks the lock by design (documented in docs/semantics.md, Limits), so
// overlaps may happen, but each must surface as `LockLost` in the holder that was overtaken, and at
// least one `LockLost` must be seen. The semaphore cells (semaphores.ts) and the election cells
// (elections.ts) are made from some of the lock's.
import { electionScenariosOf } from "./elections.ts"
import { failoverScenarios } from "./failoverFaults.ts"
import { holderScenarios } from "./holderFaults.ts"
import { networkScenarios } from "./networkFaults.ts"
import type { Scenario } from "./scenario.ts"
import { semaphoreScenariosOf } from "./semaphores.ts"
import { serverScenarios } from "./serverFaults.ts"
import { waitingScenarios } from "./waiting.ts"

export type { Expectation, FaultContext, Scenario } from "./scenario.ts"

const lockScenarios: ReadonlyArray<Scenario> = [
  ...serverScenarios,
  ...holderScenarios,
  ...waitingScenarios,
  ...networkScenarios,
  ...failoverScenarios
]

export const scenarios: ReadonlyArray<Scenario> = [
  ...lockScenarios,
  ...semaphoreScenariosOf(lockScenarios),
  ...electionScenariosOf(lockScenarios)
]
