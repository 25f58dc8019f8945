// The time limits of the commands in flight, on one shared timer.
//
// Every lock command is bounded by its own time limit (`commands.ts`). A Node timer per command
// (`setTimeout` when it is sent, `clearTimeout` when its reply comes) is a sizeable part of a
// command's client CPU when the reply comes quickly, and nearly every reply comes long before its
// limit. Here a command's limit is an entry in a list, and one timer is armed for the earliest limit
// it was armed for; a reply unlinks its entry and leaves the timer alone. When the timer fires, the
// entries whose limit has passed expire, and it is armed again for the earliest of the rest.
// Nothing expires before its limit: a timer that fires early (Node counts from the event loop's
// cached clock) only re-arms.
//
// The entries are a linked list, not a `Set`: with a module-level `Set` of these short-lived
// entries (its backing store, in the old generation, points at every new one), the collector's
// share of the client's CPU about tripled and 64 calls at once lost about a quarter of their rate.
//
// The timer is unreferenced: it does not keep the process alive by itself. A command waiting for a
// reply has a connection that does (node-redis's socket, or its reconnect timer), unless the
// application unreferenced its client, and then it asked for the process to be free to exit
// (test/ProcessLifetime.test.ts: a process with nothing else pending, its server frozen, lives until
// the limit ends the call).
// Referencing the timer only while a limit waits cost a `ref` and an `unref` per command one at a
// time, about as much as what the shared timer saves.

import { timerDelay } from "./timerDelay.ts"

/** One command's time limit: `expire` runs once `at` (on `performance.now()`'s clock) has passed. */
export class Deadline {
  readonly at: number
  readonly expire: () => void
  /** Neighbours in the list of pending limits; `undefined` once expired or cancelled. */
  previous: Deadline | undefined = undefined
  next: Deadline | undefined = undefined
  constructor(at: number, expire: () => void) {
    this.at = at
    this.expire = expire
  }
}

// The pending limits, in the order they were set, from `head` to `tail`.
let head: Deadline | undefined
let tail: Deadline | undefined
let count = 0
let timer: ReturnType<typeof setTimeout> | undefined
/** The limit the timer is armed for; `Infinity` when none is armed. */
let armedAt = Number.POSITIVE_INFINITY

const unlink = (deadline: Deadline): boolean => {
  const { previous, next } = deadline
  if (previous === undefined && head !== deadline) return false
  if (previous === undefined) head = next
  else previous.next = next
  if (next === undefined) tail = previous
  else next.previous = previous
  deadline.previous = undefined
  deadline.next = undefined
  count--
  return true
}

const arm = (at: number, now: number): void => {
  if (timer !== undefined) clearTimeout(timer)
  // A limit beyond what a timer holds is reached in steps: `fire` re-arms for what is left.
  timer = setTimeout(fire, timerDelay(at - now))
  timer.unref()
  armedAt = at
}

const fire = (): void => {
  timer = undefined
  armedAt = Number.POSITIVE_INFINITY
  const now = performance.now()
  const due: Array<Deadline> = []
  let earliest = Number.POSITIVE_INFINITY
  for (let deadline = head; deadline !== undefined; deadline = deadline.next) {
    if (deadline.at <= now) due.push(deadline)
    else if (deadline.at < earliest) earliest = deadline.at
  }
  for (const deadline of due) unlink(deadline)
  if (earliest !== Number.POSITIVE_INFINITY) arm(earliest, now)
  // Last: an expiry may send a command, and so set a limit, or cancel one.
  for (const deadline of due) deadline.expire()
}

/**
 * Calls `expire` once `millis` have passed, unless `cancel` comes first. The caller keeps the
 * returned `Deadline` to cancel it.
 */
export const after = (millis: number, expire: () => void): Deadline => {
  const now = performance.now()
  const deadline = new Deadline(now + millis, expire)
  if (tail === undefined) head = deadline
  else {
    tail.next = deadline
    deadline.previous = tail
  }
  tail = deadline
  count++
  if (deadline.at < armedAt) arm(deadline.at, now)
  return deadline
}

/** Forgets a limit that has not expired yet (a reply came, or the call was interrupted). */
export const cancel = (deadline: Deadline): void => {
  unlink(deadline)
}

/** How many limits are waiting: for tests. */
export const waiting = (): number => count
