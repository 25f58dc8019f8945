// The baseline's loop with @sage/lock's protocol: the hand-written node-redis lock of baseline.ts, but
// acquiring, renewing and releasing with the lock's own scripts (`LockScripts`: the waiter-queue check
// and the fencing token on every acquisition, the queue check on every release), sent raw by EVALSHA.
// None of the lock's client code runs. It is the floor of what the lock could reach with its protocol
// on this machine: the gap from the baseline to it is the protocol's, from it to @sage/lock the
// client's. It polls a busy key as the baseline does (it registers no waiter), so in the contended
// workloads it shows the protocol's cost, not the lock's queueing.
import { LockScripts } from "@sage/lock"
import { lockAcquireCommand, lockGranted, lockReleaseCommand, lockRenewCommand } from "../lockCommands.ts"
import { makeWith } from "./baseline.ts"
import type { PromiseLock } from "./drivers.ts"

export const make = (url: string, leaseMillis: number): Promise<PromiseLock> =>
  makeWith(url, leaseMillis, {
    scripts: [LockScripts.acquire, LockScripts.renew, LockScripts.release],
    acquire: lockAcquireCommand,
    granted: lockGranted,
    renew: lockRenewCommand,
    release: lockReleaseCommand
  })
