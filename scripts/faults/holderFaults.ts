// The faults of a holding worker's own process: paused past its lease, or killed inside its body.
import * as Effect from "effect/Effect"
import { all } from "./injection.ts"
import type { Scenario } from "./scenario.ts"

export const holderScenarios: ReadonlyArray<Scenario> = [
  {
    id: "holder-paused",
    fault: "SIGSTOP a worker inside a body for lease + 1.5 s, SIGCONT [L1]",
    deployments: all,
    expect: "violation",
    lockLostRequired: true,
    why: "a paused holder outlives its lease (semantics.md, Limits); when it resumes, its call must end with LockLost",
    inject: (context) =>
      Effect.flatMap(context.holderWorker(context.longBodyMillis), ({ worker }) =>
        context.pauseWorker(worker, context.leaseMillis + 1500)
      )
  },
  {
    id: "holder-killed",
    fault: "SIGKILL a worker inside a body",
    deployments: all,
    expect: "exclusion",
    why: "the lease frees the key; the others acquire after it ends",
    inject: (context) =>
      Effect.gen(function* () {
        yield* context.killWorker((yield* context.holderWorker()).worker)
        yield* Effect.sleep(context.leaseMillis)
      })
  }
]
