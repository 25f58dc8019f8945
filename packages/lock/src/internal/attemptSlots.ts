// How many acquire attempts one client has on the wire at once.
//
// A lease counts from its acquire request's send time, and a client's commands queue behind each
// other (in the client's event loop, on its connections, at the server). Thousands of attempts sent
// at once (a burst of `withLock` calls on distinct keys) make every reply late: acquisitions whose
// reply comes after the usable lease are refused, and the renewals of the locks already held wait
// behind the whole burst and come too late too (measured: 20,000 calls with a 1 s lease lost 10,372
// locks to renew/expired; 30,000 kept the connections so busy that they were taken for silent).
// An attempt that waits here for a slot has not been sent, so its lease has not started: the wait
// costs the caller's `waitTimeout`, never its lease, and the commands on the wire stay few enough
// for renewals and releases to get through.
//
// The bound is for a client's own queue, not for a slow server: when no attempt on the wire has had
// its reply for `stallMillis` (a Cluster node cut off, a server frozen), the attempts holding the
// slots are waiting on the server, not behind each other, so the callers waiting for a slot go
// without one, as many at a time as there are slots, every `stallMillis` while no reply comes.
// Otherwise 256 calls stuck on one unreachable Cluster node would hold up every other node's locks
// until their time limits.
//
// Plain code on the hot path: taking and giving back a free slot is a counter. Only a call that
// finds every slot taken waits, oldest first, until its deadline: on a plain timer rather than
// Effect's clock, because a burst is exactly when thousands wait, and `Effect.timeoutOption` (two
// fibers and a sleep each) made 30,000 acquisitions take 3.1 s instead of 2.2. So `TestClock` does
// not move these waits; they run in real time.
import * as Effect from "effect/Effect"

/**
 * Attempts on the wire at once, per client. Far above what a steady load keeps in flight (one per
 * fiber acquiring at that moment; the benchmarks' busiest case is 64), and enough to keep a
 * pipeline to the server full, while a burst of thousands goes out a few hundred at a time.
 */
export const attemptSlotsPerClient = 256

/**
 * How long the attempts holding every slot may go without a single reply before the callers
 * waiting for a slot go without one. A burst's replies free slots every few milliseconds.
 */
export const stallMillis = 100

/** The longest delay one Node timer holds. */
const maxTimerMillis = 2 ** 31 - 1

/** What holds a slot: set when one is handed to it while it waits. */
export interface SlotHolder {
  slot: boolean
}

/** How a wait for a slot ended: one was handed over, the slots stalled (go without one), or time ran out. */
export type WaitOutcome = "slot" | "stalled" | "timedOut"

interface Waiting {
  readonly holder: SlotHolder
  resume: ((outcome: "slot" | "stalled") => void) | undefined
}

export interface AttemptSlots {
  /** Takes a free slot for `holder`: `true` when it now holds one. */
  readonly take: (holder: SlotHolder) => boolean
  /** Gives `holder`'s slot back, if it holds one: to the oldest waiter, or to the free ones. */
  readonly give: (holder: SlotHolder) => void
  /**
   * Waits at most `millis` for a slot handed to `holder` (`"slot"`: it must give it back), or for the
   * slots to stall (`"stalled"`: it may send without one). Interrupted, it stops waiting; a slot
   * handed to it meanwhile stays its own to give back.
   */
  readonly wait: (holder: SlotHolder, millis: number) => Effect.Effect<WaitOutcome>
  /** Slots taken now (tests). */
  readonly inUse: () => number
}

export const make = (limit: number = attemptSlotsPerClient, stall: number = stallMillis): AttemptSlots => {
  let taken = 0
  const waiting: Array<Waiting> = []
  // When a slot last came free, or all were taken (read only while some call waits).
  let progressAt = 0
  let stallTimer: ReturnType<typeof setTimeout> | undefined

  const checkStall = (): void => {
    stallTimer = undefined
    if (waiting.length === 0) return
    const quiet = performance.now() - progressAt
    if (quiet < stall) {
      stallTimer = setTimeout(checkStall, stall - quiet)
      return
    }
    // As many go as there are slots, then as many again after each quiet period: a burst whose
    // replies only paused (a long collection) is not let loose all at once.
    let released = 0
    while (released < limit && waiting.length > 0) {
      const entry = waiting.shift()!
      const resume = entry.resume
      if (resume === undefined) continue
      entry.resume = undefined
      released++
      resume("stalled")
    }
    if (waiting.length > 0) stallTimer = setTimeout(checkStall, stall)
  }

  return {
    take: (holder) => {
      if (holder.slot) return true
      if (taken >= limit) return false
      if (++taken === limit) progressAt = performance.now()
      holder.slot = true
      return true
    },
    give: (holder) => {
      if (!holder.slot) return
      holder.slot = false
      if (waiting.length > 0) progressAt = performance.now()
      for (let next = waiting.shift(); next !== undefined; next = waiting.shift()) {
        const resume = next.resume
        if (resume === undefined) continue
        next.resume = undefined
        next.holder.slot = true
        resume("slot")
        return
      }
      taken--
    },
    wait: (holder, millis) =>
      Effect.callback<WaitOutcome>((resume) => {
        let timer: ReturnType<typeof setTimeout> | undefined
        const end = performance.now() + millis
        const entry: Waiting = {
          holder,
          resume: (outcome) => {
            clearTimeout(timer)
            resume(Effect.succeed(outcome))
          }
        }
        const expire = () => {
          const left = end - performance.now()
          // Node fires a timer beyond 2^31 - 1 ms after 1 ms: a longer wait takes several.
          if (left >= 1) {
            timer = setTimeout(expire, Math.min(left, maxTimerMillis))
            return
          }
          entry.resume = undefined
          resume(Effect.succeed("timedOut"))
        }
        timer = setTimeout(expire, Math.min(Math.max(0, millis), maxTimerMillis))
        waiting.push(entry)
        if (stallTimer === undefined)
          stallTimer = setTimeout(checkStall, Math.max(0, stall - (performance.now() - progressAt)))
        // Gone (interrupted) before a slot came: `give` passes it over.
        return Effect.sync(() => {
          entry.resume = undefined
          clearTimeout(timer)
        })
      }),
    inUse: () => taken
  }
}
