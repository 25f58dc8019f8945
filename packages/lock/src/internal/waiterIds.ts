// The waiter ids of a semaphore client's callers. Every waiting caller needs an id of its own in the
// server's line (a semaphore serves several callers of one process at once), and each id has a
// subscription of its own on the wake-up connection: ids are reused once their call has ended, so a
// steady load keeps a steady set of subscriptions instead of one per call.
import { newToken } from "./token.ts"

export interface WaiterIds {
  /** An id no running call of this client uses. */
  readonly take: () => string
  /** The call using `id` has ended: its registration was withdrawn or granted. */
  readonly give: (id: string) => void
}

/** The ids a client keeps for reuse; more are made while more callers wait at once. */
const kept = 256

export const make = (prefix: string): WaiterIds => {
  const free: Array<string> = []
  return {
    take: () => free.pop() ?? `${prefix}${newToken()}`,
    give: (id) => {
      if (free.length < kept) free.push(id)
    }
  }
}
