// The fault matrix's CI subset: a few scenarios per deployment from scripts/faults/scenarios.ts, run
// exactly as `npm run faults` runs them (real servers, worker processes, the independent checker),
// so a regression in exclusion, loss reporting or liveness fails `npm test`. The whole matrix, with
// its report in docs/faults.md, is `npm run faults`.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { ServerBinary } from "@sage/lock-testkit"
import { describeCall } from "../calls.ts"
import type { DeploymentKind } from "../deployments.ts"
import { describeExcess, describeOverlap } from "../checker.ts"
import { describeObserverViolation } from "../observers.ts"
import { fastSettings, runCell } from "../run.ts"
import { scenarios } from "../scenarios.ts"
import { describeTokenViolation } from "../verdict.ts"

const flavors = ServerBinary.flavorsUnderTest()
/** Alternate the flavors over the cells, so both are covered without doubling the time. */
const flavorAt = (i: number): ServerBinary.Flavor => flavors[i % flavors.length] ?? "redis7"

/** A scenario, the deployment it runs on, and the server flavor when it must be one (else they alternate). */
const subset: ReadonlyArray<readonly [string, DeploymentKind, ServerBinary.Flavor?]> = [
  ["holder-paused", "standalone"],
  ["lost-replies", "standalone"],
  // A commanded failover once broke exclusion: renewals on the old master were acknowledged by the
  // replica that was not promoted. (A stalled sentinel is covered by Sentinel.test.ts.)
  ["sentinel-failover", "sentinel"],
  ["replica-stall", "sentinel"],
  ["cluster-failover-force", "cluster"],
  ["key-theft", "cluster"],
  // Wake-ups refused mid-run: waiters fall back to polling, and no client retries in a loop. On
  // ioredis too: its own resubscription once ended the process on the refusal.
  ["subscribe-revoked", "standalone"],
  ["subscribe-revoked", "ioredis"],
  // Waiters killed while registered: the release passes over them, and the lock never stands free
  // while a live waiter waits (Sentinel: woken, not granted, so the served waiter moves to the head).
  ["waiters-killed", "sentinel"],
  // Semaphores: a dead holder's permits return to the line after its lease (or its grant's claim
  // window), and waiters killed while registered are passed over (Sentinel: served by reservation);
  // never more than the limit held. The failover cells run in the full matrix: with these shortened
  // phases, permits granted before the failover can outlast the run's last seconds.
  ["semaphore-holder-killed", "standalone"],
  ["semaphore-waiters-killed", "sentinel"],
  // Elections: a leader killed in its work, the next one within its lease + 1 s, and every
  // observer's states in term order, each term one some campaign won.
  ["election-holder-killed", "standalone", "redis7"]
]

describe.concurrent("fault matrix subset", () => {
  for (const [i, [id, kind, pinned]] of subset.entries()) {
    const scenario = scenarios.find((candidate) => candidate.id === id)
    if (scenario === undefined) throw new Error(`no scenario ${id}`)
    const flavor = pinned !== undefined && flavors.includes(pinned) ? pinned : flavorAt(i)
    it.live(
      `${id} on ${kind} (${flavor}): ${scenario.expect}`,
      () =>
        Effect.gen(function* () {
          const result = yield* runCell(scenario, kind, flavor, fastSettings)
          const counts = result.counts
          assert.isDefined(counts, result.problems.join("\n"))
          assert.deepStrictEqual(result.problems, [], result.problems.join("\n"))
          // The verdict's evidence, stated again so a weakened checker cannot pass silently.
          assert.isAbove(counts?.acquisitionsAfterHeal ?? 0, 0)
          assert.strictEqual(counts?.history.grants, counts?.acquisitions, "every grant carries its fencing token")
          assert.deepStrictEqual((counts?.history.endings.open ?? []).map(describeCall), [])
          assert.deepStrictEqual(result.keysLeft, [])
          assert.strictEqual(result.strandedRegistrations, 0)
          if (scenario.semaphore === true) {
            // The bodies reached the limit: a checker of permits held had something to check.
            assert.isAtLeast(
              counts?.peakPermits ?? 0,
              fastSettings.semaphoreLimit,
              "the permits in use never reached the limit"
            )
          }
          if (scenario.election === true) {
            // The observers showed leaders, in order, and only terms some campaign won.
            assert.isAbove(counts?.observers?.leaders ?? 0, 0, "the observers showed no leader")
            assert.deepStrictEqual((counts?.observers?.violations ?? []).map(describeObserverViolation), [])
            assert.deepStrictEqual(counts?.observers?.failures ?? [], [])
          }
          if (scenario.expect === "exclusion") {
            assert.deepStrictEqual((counts?.overlaps ?? []).map(describeOverlap), [])
            assert.deepStrictEqual((counts?.overLimit ?? []).map(describeExcess), [])
            // On a semaphore key an inversion that grant order explains is counted, not failed (permits.ts).
            assert.deepStrictEqual(
              (counts?.history.tokenViolations ?? [])
                .filter((v) => v.inGrantOrder !== true)
                .map(describeTokenViolation),
              []
            )
          } else {
            assert.isTrue((counts?.overlaps ?? []).every((overlap) => overlap.surfaced))
            assert.isTrue((counts?.overLimit ?? []).every((excess) => excess.surfaced))
            const lost =
              counts === undefined ? 0 : counts.lockLost.acquire + counts.lockLost.renew + counts.lockLost.release
            assert.isAbove(lost, 0, "the fault took a lock away but no LockLost surfaced")
          }
        }),
      90_000
    )
  }
})
