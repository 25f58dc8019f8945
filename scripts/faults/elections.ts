// The election cells: a representative subset of the lock's faults, each injected exactly as the
// lock's scenario injects it, while the workers campaign for the keys as election names
// (`Election.campaign`, then `leadership.lead(body)` and `resign`; the body writes the term as its
// fencing token) and an observer per key in every worker writes what `Election.observe` shows.
// Leadership is the election's lock, so "exclusion" and "violation" mean what they mean for the lock
// (no two leaders' bodies at once; every overlap surfaced as `LockLost` in the overtaken leader), and
// the checker's token order is the terms' order. The observers' order (observers.ts) is promised
// even where exclusion is not, and is checked in every cell. Listed in scenarios.ts after the
// semaphore cells.
import type { Scenario } from "./scenario.ts"

const election = (
  base: ReadonlyArray<Scenario>,
  id: string,
  overrides: Partial<Scenario> & Pick<Scenario, "why">
): Scenario => {
  const lock = base.find((scenario) => scenario.id === id)
  if (lock === undefined) throw new Error(`no scenario ${id} to make an election cell of`)
  return { ...lock, ...overrides, id: `election-${id}`, election: true }
}

/** The election forms of some of `base`'s scenarios. */
export const electionScenariosOf = (base: ReadonlyArray<Scenario>): ReadonlyArray<Scenario> => [
  election(base, "baseline", {
    why: "no fault: one leader's body at a time, terms rising, observers in term order"
  }),
  election(base, "master-stop-long", {
    why:
      "leaders give up at the usable lease (LockLost expired, work interrupted) before the key expires; replicated: a " +
      "failover happens and the resumed old master is refused by the ROLE/view check, as for a lock; observers read " +
      "through the stall and never show an older term from the resumed node"
  }),
  election(base, "master-kill-restart-empty", {
    why:
      "a restart without persistence forgets the leader, its record and the fence key (semantics.md, Limits): a new " +
      "leader can begin while the old one's work runs, and the old leader must learn it (LockLost) at a renewal; terms " +
      "still rise (they are the server's time) and observers must not show the forgotten term again"
  }),
  election(base, "master-kill-failover-restart", {
    why:
      "with replica acknowledgement every grant and proclamation is on the promoted replica; the restarted empty node " +
      "is refused by the view check, and observers never show a term it reports"
  }),
  election(base, "client-pause-write", {
    why: "campaigns, proclamations, renewals and resignations wait out the pause and are retried within their budgets"
  }),
  election(base, "holder-paused", {
    fault: "SIGSTOP a worker inside a leader's work for lease + 1.5 s, SIGCONT [L1]",
    why:
      "a paused leader outlives its lease (election.md, The term is a fencing token): another leads meanwhile, and when " +
      "the paused one resumes its lead must end with LockLost"
  }),
  election(base, "holder-killed", {
    fault: "SIGKILL a worker inside a leader's work",
    why: "the dead leader's lease frees the election: another candidate leads within its lease + 1 s"
  })
]
