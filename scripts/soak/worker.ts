// One soak worker process: builds a lock client on the standalone server, waits for "start", runs its
// load (loads.ts) for the run's duration while sampling itself, then stops the load, lets the client
// go idle, closes the lock layer, and reports its counts and the probes taken before, during and
// after (protocol.ts). Started by run.ts as
// `node --expose-gc --conditions=@sage/source soak/worker.ts '<WorkerParams json>'`.
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { NodeRuntime } from "@effect/platform-node"
import { Lock } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import * as Fibers from "./fibers.ts"
import * as Loads from "./loads.ts"
import { type WorkerLine, type WorkerParams, WorkerParamsJson } from "./protocol.ts"
import { grownResources, nextTurn, probe, resourceCounts, sampler } from "./usage.ts"
import { connectionsPerProcess } from "./scenarios.ts"
import { startSignal } from "../tooling/parentSignal.ts"

const emit = (line: WorkerLine): void => {
  process.stdout.write(`${JSON.stringify(line)}\n`)
}

/** Polls `done` every 50 ms for at most `millis` (on a fresh turn: see `nextTurn`). */
const settle = (done: () => boolean, millis: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    const deadline = performance.now() + millis
    while (!done() && performance.now() < deadline) yield* Effect.andThen(Effect.sleep(50), nextTurn)
  })

const noSockets = (): boolean => process.getActiveResourcesInfo().every((kind) => kind !== "TCPSocketWrap")

const runLoad = (params: WorkerParams, fibers: Fibers.FiberCounter, started: Promise<void>) =>
  Effect.gen(function* () {
    const lock = yield* Lock.Lock
    const beforeLoad = yield* probe(fibers)
    emit({ _tag: "ready", pid: process.pid })
    yield* Effect.promise(() => started)

    const stop = Loads.makeStop()
    const load = Loads.make(lock, params.load, stop)
    const startedAt = performance.now()
    const sample = sampler(fibers, startedAt, load.inBody)
    const sampling = yield* Effect.forkChild(
      Effect.forever(
        Effect.andThen(
          Effect.sleep(params.sampleMillis),
          Effect.sync(() => emit({ _tag: "sample", sample: sample() }))
        )
      )
    )
    const running = yield* Effect.forkChild(load.run)
    const until = (fraction: number) =>
      Effect.suspend(() => Effect.sleep(Math.max(0, startedAt + fraction * params.durationMillis - performance.now())))
    yield* until(0.2)
    // The early probe is the baseline of "under steady load": not before the ramp-up is over.
    yield* settle(load.ramped, params.durationMillis * 0.3)
    const earlyLoad = yield* probe(fibers)
    yield* until(1)
    const lateLoad = yield* probe(fibers)
    const stoppedAt = performance.now()
    yield* Deferred.succeed(stop.signal, undefined)
    const counts = yield* Fiber.join(running)
    const stopMillis = Math.round(performance.now() - stoppedAt)
    yield* Fiber.interrupt(sampling)
    // The renewal scheduler lingers one renewal period (a third of the lease) after its last lease;
    // releases abandoned at their 1 s bound may still be written or answered (their commands held
    // by the client until then), and log lines still being written.
    yield* settle(
      () =>
        fibers.live() <= beforeLoad.liveFibers &&
        grownResources(beforeLoad.resources, resourceCounts(), connectionsPerProcess).length === 0,
      params.leaseMillis + 2000
    )
    const afterLoad = yield* probe(fibers)
    return { counts, beforeLoad, earlyLoad, lateLoad, afterLoad, stopMillis }
  })

const program = Effect.gen(function* () {
  emit({ _tag: "starting", pid: process.pid })
  const started = startSignal()
  const params = yield* Schema.decodeUnknownEffect(WorkerParamsJson)(process.argv[2])
  const fibers = Fibers.make()
  const beforeLayer = yield* probe(fibers)
  const lockLayer = Lock.layer({ leaseDuration: params.leaseMillis, namespace: params.namespace }).pipe(
    Layer.provide(NodeRedisBackend.layer({ url: params.url }))
  )
  const measured = yield* fibers.counted(runLoad(params, fibers, started).pipe(Effect.provide(lockLayer)))
  // Closing the layer closes its connections; their sockets leave the event loop a moment later.
  yield* settle(noSockets, 2000)
  const afterClose = yield* probe(fibers)
  emit({ _tag: "result", result: { ...measured, beforeLayer, afterClose } })
}).pipe(
  Effect.tapCause((cause) =>
    Effect.sync(() => emit({ _tag: "fatal", message: Cause.pretty(cause).split("\n").slice(0, 3).join(" ") }))
  )
)

NodeRuntime.runMain(program, { disableErrorReporting: true })
