// The checker's rules for semaphore keys (calls that report permits, docs/semaphores.md), from the
// workers' lines alone like the rest of the checker:
// - at no instant do the bodies inside on one key hold more permits than its limit: each stretch in
//   which one set of bodies does is an excess, to be judged as the lock's overlaps are (forbidden
//   under "exclusion", to be surfaced as `LockLost` in one of its holders under "violation");
// - a holder killed inside its body keeps its permits until its lease runs out at the latest; after
//   that, the head of the line does not wait long for them (the semaphore's form of the lock's
//   takeover).
// - fencing tokens: a semaphore's grants draw from one sequence per key, so history.ts checks them
//   as it checks a lock's (distinct, and a body that entered after another left holds a higher
//   token). A grant reaches its body some time after the server made it, though, and meanwhile
//   another permit can be granted, used and given back: such an inversion is in grant order when
//   the later body's call began before the earlier body entered (its grant may have come first).
//   One whose call began after that contradicts grant order, as a lock's would.
import { bodyEnd, type Call, killTime, type WorkerFault, waitingSpans } from "./calls.ts"

/** A stretch in which one set of bodies on a semaphore key held more permits than its limit. */
export interface Excess {
  readonly key: string
  readonly limit: number
  /** The permits the bodies held together. */
  readonly held: number
  /** When that set of bodies began and ceased to be inside together (monotonic µs). */
  readonly from: number
  readonly to: number
  readonly holders: ReadonlyArray<Call>
  /** At least one of the holders learned of it: its call ended with `LockLost`. */
  readonly surfaced: boolean
}

const permitsOf = (call: Call): number => call.permits?.count ?? 0

/** A key's limit: the smallest any of its calls gave (every caller gives the same one). */
const limitOf = (calls: ReadonlyArray<Call>): number =>
  calls.reduce((limit, call) => Math.min(limit, call.permits?.limit ?? Infinity), Infinity)

/** The bodies of semaphore calls, by key. */
const semaphoreBodies = (calls: Iterable<Call>): Map<string, Array<Call>> => {
  const keys = new Map<string, Array<Call>>()
  for (const call of calls) {
    if (call.entered === undefined || call.permits === undefined) continue
    const list = keys.get(call.key) ?? []
    list.push(call)
    keys.set(call.key, list)
  }
  return keys
}

/** What the sweep over a run's semaphore bodies found. */
export interface PermitsHeld {
  readonly excesses: Array<Excess>
  /** The most permits the bodies on one key held at once (0 without semaphore calls): how close the run came to the limit. */
  readonly peak: number
}

/**
 * Every excess on the semaphore keys: a sweep over body intervals (a killed holder's body ends at its
 * kill, as for overlaps) weighted by their permits. At equal times bodies leave before others enter:
 * a hand-off in one microsecond is no excess.
 */
export const permitsHeld = (
  calls: Iterable<Call>,
  faults: ReadonlyArray<WorkerFault>,
  endedAt: number
): PermitsHeld => {
  const excesses: Array<Excess> = []
  let peak = 0
  for (const [key, bodies] of semaphoreBodies(calls)) {
    const limit = limitOf(bodies)
    const events: Array<{ readonly t: number; readonly call: Call; readonly enters: boolean }> = []
    for (const call of bodies) {
      const entered = call.entered ?? 0
      const end = bodyEnd(call, faults, endedAt)
      if (end <= entered) continue
      events.push({ t: entered, call, enters: true }, { t: end, call, enters: false })
    }
    events.sort((a, b) => a.t - b.t || Number(a.enters) - Number(b.enters))
    const inside = new Set<Call>()
    let held = 0
    let open: { readonly from: number; readonly held: number; readonly holders: Array<Call> } | undefined
    for (let i = 0; i < events.length; i++) {
      const event = events[i]
      if (event === undefined) continue
      if (event.enters) inside.add(event.call)
      else inside.delete(event.call)
      held += event.enters ? permitsOf(event.call) : -permitsOf(event.call)
      // The state holds from this time on once every event of this time is applied.
      if (events[i + 1]?.t === event.t) continue
      peak = Math.max(peak, held)
      if (open !== undefined) {
        excesses.push({
          key,
          limit,
          held: open.held,
          from: open.from,
          to: event.t,
          holders: open.holders,
          surfaced: open.holders.some((call) => call.outcome === "LockLost")
        })
      }
      open = held > limit ? { from: event.t, held, holders: [...inside] } : undefined
    }
  }
  return { excesses, peak }
}

/** When the permits of a killed holder came back in use, and how long the line waited for them. */
export interface Reclaim {
  /** The first body entered after the kill while live bodies held more than the limit less the dead permits. */
  readonly next: Call | undefined
  /**
   * The longest stretch after the dead leases ran out (kill + lease) and before `next` in which the
   * head of the line would have been served with the dead permits and was not without them
   * (undefined: none).
   */
  readonly stuck: { readonly from: number; readonly to: number } | undefined
}

/**
 * For a holder killed at `killedAt` on a semaphore key (`calls`: every call of that key): every body
 * inside at a kill of its worker up to then is dead, and its permits stay taken until its lease runs
 * out. Live bodies holding more than `limit - dead permits` show that some came back.
 *
 * The line is first come, first served (docs/semaphores.md, Who goes first): while its head asks for
 * more permits than the live bodies leave, the dead permits alone would serve nobody, so a free
 * permit unused then is the line's rule, not a permit kept. The head is taken to be the live call
 * that began waiting first, since a call registers at its first attempt.
 */
export const reclaimOf = (
  calls: ReadonlyArray<Call>,
  killedAt: number,
  leaseMillis: number,
  faults: ReadonlyArray<WorkerFault>,
  endedAt: number
): Reclaim => {
  const bodies = calls.filter((call) => call.entered !== undefined && call.permits !== undefined)
  const deadAt = (call: Call): number | undefined =>
    call.left === undefined ? killTime(faults, call.worker) : undefined
  const dead = new Set(
    bodies.filter((call) => {
      const kill = deadAt(call)
      return kill !== undefined && kill <= killedAt && (call.entered ?? 0) < kill
    })
  )
  const limit = limitOf(calls)
  const room = limit - [...dead].reduce((sum, call) => sum + permitsOf(call), 0)
  const live = bodies.filter((call) => !dead.has(call))
  const heldAt = (t: number): number =>
    live
      .filter((call) => (call.entered ?? 0) <= t && bodyEnd(call, faults, endedAt) > t)
      .reduce((sum, call) => sum + permitsOf(call), 0)
  const next = live
    .filter((call) => (call.entered ?? 0) > killedAt)
    .toSorted((a, b) => (a.entered ?? 0) - (b.entered ?? 0))
    .find((call) => heldAt(call.entered ?? 0) > room)
  // Live calls waiting (the waits of paused or killed workers cut out), in the order they began.
  const waits = calls
    .toSorted((a, b) => a.begin - b.begin)
    .flatMap((call) => waitingSpans(call, faults, endedAt).map(([from, to]) => ({ from, to, call })))
  const needed = (t: number): boolean => {
    const head = waits.find((wait) => wait.from <= t && wait.to > t)
    if (head === undefined) return false
    const wanted = heldAt(t) + permitsOf(head.call)
    return wanted <= limit && wanted > room
  }
  // Whether they are needed changes only when a wait or a body begins or ends: a sweep over those
  // instants from the end of the dead leases to the first proof of their return.
  const lapsed = killedAt + leaseMillis * 1000
  const until = Math.min(next?.entered ?? endedAt, endedAt)
  const instants = [
    lapsed,
    until,
    ...waits.flatMap((wait) => [wait.from, wait.to]),
    ...live.flatMap((call) => [call.entered ?? 0, bodyEnd(call, faults, endedAt)])
  ]
    .filter((t) => t >= lapsed && t <= until)
    .toSorted((a, b) => a - b)
  let stuck: { from: number; to: number } | undefined
  let since: number | undefined
  for (const t of instants) {
    if (since !== undefined && (t === until || !needed(t))) {
      if (stuck === undefined || t - since > stuck.to - stuck.from) stuck = { from: since, to: t }
      since = undefined
    }
    if (since === undefined && t < until && needed(t)) since = t
  }
  return { next, stuck }
}

/**
 * For a token-order violation on a semaphore key (`later` entered after every body in `endedBefore`
 * left, and one of those holds a token not below its own): the earlier grant that grant order alone
 * forbids, one whose body entered no later than `later`'s call began. Its grant came before that
 * body, and `later`'s after the call began, so its token must be smaller. Undefined when every
 * inversion is explained by `later`'s grant reaching its body late.
 */
export const grantOrderWitness = (endedBefore: ReadonlyArray<Call>, later: Call): Call | undefined =>
  endedBefore
    .filter((call) => (call.entered ?? 0) <= later.begin && (call.token ?? 0) >= (later.token ?? 0))
    .reduce<Call | undefined>(
      (found, call) => (found === undefined || (call.token ?? 0) > (found.token ?? 0) ? call : found),
      undefined
    )
