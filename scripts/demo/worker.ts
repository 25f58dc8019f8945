// One demo worker process: makes `deposits` deposits into the shared account, each a non-atomic
// GET, sleep, SET under `withLock`, and reports every step as a JSON line on stdout (see protocol.ts).
// The lock's backend matches the deployment the parent describes: standalone, Cluster or Sentinel.
// Started by main.ts; runnable by hand as
// `node --conditions=@sage/source demo/worker.ts '<WorkerParams json>'`.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { NodeRuntime } from "@effect/platform-node"
import { Lock, type LockError } from "@sage/lock"
import * as Account from "./account.ts"
import { backendLayer } from "./backendLayer.ts"
import { encodeEvent, monotonicMicros, type WorkerEvent, type WorkerParams, WorkerParamsJson } from "./protocol.ts"
import { startSignal } from "../tooling/parentSignal.ts"

// Pipe writes are synchronous on Linux, so an event written before a SIGKILL reaches the parent.
const emit = (event: WorkerEvent): Effect.Effect<void> =>
  Effect.sync(() => {
    process.stdout.write(`${encodeEvent(event)}\n`)
  })

/** What ends a worker early: the account's client, or a lock error that waiting again cannot fix. */
type WorkerError = Account.AccountError | LockError.InvalidArgument | LockError.LockRedisError

/** The worker's whole life: connect, deposit `params.deposits` times, report `done`. */
const run = (params: WorkerParams, started: Promise<void>) =>
  Effect.gen(function* () {
    const { worker } = params
    const account = yield* Account.connect(params.connection, { balance: params.balanceKey, slow: params.slowKey })
    const lock = yield* Lock.Lock
    yield* emit({ _tag: "ready", worker, pid: process.pid })
    yield* Effect.promise(() => started)

    /** One attempt at deposit number `deposit`; true when its SET completed. */
    const attempt = (deposit: number): Effect.Effect<boolean, WorkerError> => {
      // Set once SET returned, so a LockLost raised after it still counts the deposit as made.
      let deposited = false
      return Effect.gen(function* () {
        const start = yield* Clock.currentTimeMillis
        let acquiredAt = start
        const body = Effect.gen(function* () {
          const enteredAt = yield* Effect.sync(monotonicMicros)
          acquiredAt = yield* Clock.currentTimeMillis
          // Taken under the lock, so exactly one holder gets the mark and becomes the parent's victim.
          const slow = yield* account.takeSlow
          yield* emit({ _tag: "acquired", worker, deposit, waitMillis: acquiredAt - start, slow, enteredAt })
          const balance = yield* account.get
          yield* Effect.sleep(slow ? params.slowMillis : params.bodyMillis)
          yield* account.set(balance + 1)
          deposited = true
          yield* emit({ _tag: "deposited", worker, deposit, balance: balance + 1 })
        }).pipe(
          // Still inside the lock (withLock releases after the body), also when the body fails or is
          // interrupted; only a SIGKILL skips it, and the parent knows when it sent that.
          Effect.ensuring(Effect.suspend(() => emit({ _tag: "left", worker, deposit, leftAt: monotonicMicros() })))
        )
        yield* params.useLock ? lock.withLock(params.lockKey, { waitTimeout: params.waitTimeoutMillis })(body) : body
        const releasedAt = yield* Clock.currentTimeMillis
        yield* emit({ _tag: "released", worker, deposit, heldMillis: releasedAt - acquiredAt })
        return deposited
      }).pipe(
        Effect.catchTags({
          LockLost: (error) =>
            Effect.as(emit({ _tag: "lost", worker, deposit, phase: error.phase, reason: error.reason }), deposited),
          TimedOut: (error) =>
            Effect.as(emit({ _tag: "timedOut", worker, deposit, waitedMillis: error.waitedMillis }), false)
        }),
        Effect.tapError((error) => emit({ _tag: "failed", worker, deposit, error: error._tag, message: error.message }))
      )
    }

    // A deposit that timed out (or lost the lock before its SET) is retried, within a bound.
    let done = 0
    let attempts = 0
    while (done < params.deposits && attempts < params.deposits * 3) {
      attempts++
      if (yield* attempt(done + 1)) done++
      // Work outside the lock, so that the other workers get their turns.
      yield* Effect.sleep(5 + Math.floor(Math.random() * 15))
    }
    yield* emit({ _tag: "done", worker, deposits: done })
  }).pipe(
    Effect.provide(
      Lock.layer({ leaseDuration: params.leaseMillis, namespace: params.namespace }).pipe(
        Layer.provide(backendLayer(params.connection))
      )
    ),
    Effect.scoped
  )

const program = Effect.gen(function* () {
  const started = startSignal()
  const params = yield* Schema.decodeUnknownEffect(WorkerParamsJson)(process.argv[2])
  yield* run(params, started)
})

program.pipe(NodeRuntime.runMain)
