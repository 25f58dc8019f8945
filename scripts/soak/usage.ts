// Readings of the worker process itself: memory, CPU, live fibers and the handles that keep the event
// loop alive. `probe` forces a full GC first (the worker runs with --expose-gc), so its heap figure
// is what is still reachable: comparing two probes tells a leak from garbage not yet collected.
import * as Effect from "effect/Effect"
import type { FiberCounter } from "./fibers.ts"
import type { Probe, Sample } from "./protocol.ts"

const collect = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("the soak worker needs node --expose-gc")
  // Twice: the first pass can leave objects that only the second finds unreachable (weak refs, finalizers).
  gc()
  gc()
}

/** `process.getActiveResourcesInfo()` counted by kind. */
export const resourceCounts = (): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1
  return counts
}

/**
 * Reads on a fresh turn of the event loop: a fiber resumed by a timer runs inside that timer's
 * callback, where the timer still counts as active; and fibers forked just before have started.
 */
export const nextTurn: Effect.Effect<void> = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Heap after a full GC, live fibers and active resources, now. */
export const probe = (fibers: FiberCounter): Effect.Effect<Probe> =>
  Effect.andThen(
    nextTurn,
    Effect.sync(() => {
      collect()
      return { heapUsed: process.memoryUsage().heapUsed, liveFibers: fibers.live(), resources: resourceCounts() }
    })
  )

/** Takes samples: each call reads memory and the CPU used since the previous call. */
export const sampler = (fibers: FiberCounter, startedAt: number, inBody: () => number) => {
  let cpu = process.cpuUsage()
  let at = performance.now()
  return (): Sample => {
    const now = performance.now()
    const used = process.cpuUsage(cpu)
    cpu = process.cpuUsage()
    const elapsedMicros = Math.max(1, (now - at) * 1000)
    at = now
    const memory = process.memoryUsage()
    return {
      t: Math.round(now - startedAt),
      heapUsed: memory.heapUsed,
      rss: memory.rss,
      cpuPercent: (100 * (used.user + used.system)) / elapsedMicros,
      liveFibers: fibers.live(),
      resources: process.getActiveResourcesInfo().length,
      inBody: inBody()
    }
  }
}

/**
 * Resource kinds (timers, sockets) of which `after` has more than `before`, except sockets up to
 * `sockets`: a client opens its wake-up subscriber the first time it waits, and keeps it.
 */
export const grownResources = (
  before: Readonly<Record<string, number>>,
  after: Readonly<Record<string, number>>,
  sockets = 0
): Array<string> =>
  Object.entries(after).flatMap(([kind, n]) => {
    const was = before[kind] ?? 0
    const allowed = kind === "TCPSocketWrap" ? Math.max(was, sockets) : was
    return n > allowed ? [`${kind} ${was} -> ${n}`] : []
  })
