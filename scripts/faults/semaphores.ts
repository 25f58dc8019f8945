// The semaphore cells: a representative subset of the lock's faults, each injected exactly as the
// lock's scenario injects it, while the workers loop `Semaphore.withPermits` (the run's limit, 1 or 2
// permits a call) instead of `withLock`. "exclusion" means that no instant has more permits held on
// a key than its limit; "violation" that every such instant surfaces as `LockLost` in one of the
// holders involved (docs/semaphores.md, Leases). Listed in scenarios.ts after the lock's.
import type { Scenario } from "./scenario.ts"

const semaphore = (
  base: ReadonlyArray<Scenario>,
  id: string,
  overrides: Partial<Scenario> & Pick<Scenario, "why">
): Scenario => {
  const lock = base.find((scenario) => scenario.id === id)
  if (lock === undefined) throw new Error(`no scenario ${id} to make a semaphore cell of`)
  return { ...lock, ...overrides, id: `semaphore-${id}`, semaphore: true }
}

/** The semaphore forms of some of `base`'s scenarios. */
export const semaphoreScenariosOf = (base: ReadonlyArray<Scenario>): ReadonlyArray<Scenario> => [
  semaphore(base, "baseline", { why: "no fault: never more permits held on a key than its limit" }),
  semaphore(base, "master-stop-long", {
    why:
      "holders give up at the usable lease (LockLost expired, body interrupted) before their permits expire; replicated: " +
      "a failover happens and the resumed old master is refused by the ROLE/view check, as for a lock"
  }),
  semaphore(base, "master-kill-restart-empty", {
    why:
      "a restart without persistence forgets every holder (semaphores.md, Leases): more than the limit can be held at once, " +
      "and every instant over it must surface as LockLost in one of its holders, at a renewal or the release"
  }),
  semaphore(base, "master-kill-failover-restart", {
    why:
      "with replica acknowledgement every holder, grant and reservation is on the promoted replica; the restarted empty " +
      "node is refused by the view check"
  }),
  semaphore(base, "client-pause-write", {
    why: "acquisitions, renewals and releases wait out the pause and are retried within the budget"
  }),
  semaphore(base, "holder-killed", {
    fault: "SIGKILL a worker inside a body (3 workers)",
    workers: 3,
    why:
      "the dead holder's permits stay taken until its lease ends, then return to the line: never more than the limit " +
      "held, and once its lease has run out the head of the line does not wait more than 1 s for them"
  }),
  semaphore(base, "waiters-killed", {
    why:
      "a dead waiter's place cannot hold the line or its permits for long: it is passed over when its turn comes " +
      "(nobody hears its message) and its registration lapses; a key with live waiters never stands empty for more " +
      "than half a registration lifetime"
  })
]
