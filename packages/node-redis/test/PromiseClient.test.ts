// The Promise API on a real server, called the way code outside Effect calls it: async functions,
// their signals aborted on loss, the library's errors as rejections (instanceof and _tag), the
// function's own rejection unchanged, handles released by Symbol.asyncDispose, semaphores and
// elections; two clients stand for two processes.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { LockScripts, PromiseClient } from "@sage/lock"
import { InvalidArgument, LockLost, TimedOut } from "@sage/lock/LockError"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { namespace } from "./support.ts"

const flavor = ServerBinary.flavorsUnderTest()[0]!

/** Two Promise clients (two processes, as far as the server can tell), closed with the scope. */
const clients = (url: string, leaseMillis = 1_000) =>
  Effect.gen(function* () {
    const ns = namespace("promise")
    const options = {
      lock: { namespace: ns, leaseDuration: leaseMillis },
      semaphore: { namespace: ns, leaseDuration: leaseMillis },
      election: { namespace: ns, leaseDuration: leaseMillis, observeInterval: 200 }
    }
    const make = () =>
      Effect.acquireRelease(
        Effect.sync(() => PromiseClient.make(NodeRedisBackend.layer({ url }), options)),
        (client) => Effect.promise(() => client.close())
      )
    return { ns, a: yield* make(), b: yield* make() }
  })

const rejection = (promise: Promise<unknown>) =>
  Effect.promise(() =>
    promise.then(
      () => undefined,
      (error: unknown) => error
    )
  )

const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))

describe(`the Promise API on ${flavor}`, () => {
  it.live("using: exclusion between two clients, the value returned, the function's rejection unchanged", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const { a, b } = yield* clients(server.url)
      let inside = 0
      let most = 0
      const work = (client: PromiseClient.PromiseClient, i: number) =>
        client.using("account", { waitTimeout: 10_000 }, async (_signal, lease) => {
          inside++
          most = Math.max(most, inside)
          await sleep(10)
          inside--
          return [i, lease.fencingToken] as const
        })
      const results = yield* Effect.promise(() =>
        Promise.all(Array.from({ length: 10 }, (_, i) => work(i % 2 === 0 ? a : b, i)))
      )
      assert.deepStrictEqual(
        results.map(([i]) => i),
        Array.from({ length: 10 }, (_, i) => i)
      )
      assert.strictEqual(most, 1, "never two at once")
      assert.strictEqual(new Set(results.map(([, token]) => token)).size, 10, "a fencing token per grant")
      const own = new RangeError("the function's own")
      const thrown = yield* rejection(
        a.using("account", { waitTimeout: 1_000 }, async () => {
          throw own
        })
      )
      assert.strictEqual(thrown, own, "rejected with the very error the function threw")
      const bad = yield* rejection(a.using("account", { waitTimeout: -5 }, async () => 1))
      assert.instanceOf(bad, InvalidArgument)
      assert.strictEqual((bad as InvalidArgument).field, "waitTimeout")
    })
  )

  it.live("a lost lock aborts the function's signal and rejects with LockLost", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const { ns, a } = yield* clients(server.url)
      let aborted: unknown
      const call = a.using("job", { waitTimeout: 1_000 }, (signal) => {
        signal.addEventListener("abort", () => (aborted = signal.reason))
        return new Promise<never>(() => {})
      })
      const settled = rejection(call)
      yield* Effect.sleep(100)
      yield* server.command("DEL", LockScripts.lockKey(ns, "job"))
      const error = yield* settled
      assert.instanceOf(error, LockLost)
      assert.strictEqual((error as LockLost)._tag, "LockLost")
      assert.isDefined(aborted, "the signal aborted")
    })
  )

  it.live("tryUsing, acquire with its handle, and a busy lock timing out", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const { ns, a, b } = yield* clients(server.url)
      const held = yield* Effect.promise(() => a.acquire("res", { waitTimeout: 1_000 }))
      assert.isAbove(held.fencingToken, 0)
      assert.isAbove(held.remainingMillis(), 0)
      const busy = yield* Effect.promise(() => b.tryUsing("res", async () => "ran"))
      assert.deepStrictEqual(busy, { acquired: false })
      const timedOut = yield* rejection(b.using("res", { waitTimeout: 300 }, async () => "ran"))
      assert.instanceOf(timedOut, TimedOut)
      // Held past several leases: renewed.
      yield* Effect.sleep(2_500)
      assert.isFalse(held.signal.aborted)
      // `await using` ends its block with this.
      yield* Effect.promise(() => held[Symbol.asyncDispose]())
      assert.isNull(yield* server.command("GET", LockScripts.lockKey(ns, "res")), "released")
      assert.deepStrictEqual(yield* Effect.promise(() => b.tryUsing("res", async () => "ran")), {
        acquired: true,
        value: "ran"
      })
      // A handle whose lock is taken away aborts its signal.
      const again = yield* Effect.promise(() => a.acquire("res", { waitTimeout: 1_000 }))
      yield* server.command("DEL", LockScripts.lockKey(ns, "res"))
      yield* Effect.promise(
        () => new Promise<void>((resolve) => again.signal.addEventListener("abort", () => resolve()))
      )
      assert.instanceOf(again.signal.reason, LockLost)
      yield* Effect.promise(() => again.release())
    })
  )

  it.live("semaphores: at most the limit at once across clients", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const { a, b } = yield* clients(server.url)
      let inside = 0
      let most = 0
      yield* Effect.promise(() =>
        Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            (i % 2 === 0 ? a : b).withPermits("pool", { limit: 3, waitTimeout: 10_000 }, async () => {
              inside++
              most = Math.max(most, inside)
              await sleep(20)
              inside--
            })
          )
        )
      )
      assert.strictEqual(most, 3)
      const permits = yield* Effect.promise(() =>
        a.acquirePermits("pool", { limit: 3, permits: 3, waitTimeout: 1_000 })
      )
      assert.deepStrictEqual(yield* Effect.promise(() => b.tryWithPermits("pool", { limit: 3 }, async () => 1)), {
        acquired: false
      })
      yield* Effect.promise(() => permits.release())
    })
  )

  it.live("elections: a lead, its proclamation, an observer's iterator, and the hand-over on resign", () =>
    Effect.gen(function* () {
      const server = yield* RedisServer.start({ flavor })
      const { a, b } = yield* clients(server.url, 5_000)
      // Each distinct term the observer shows (a proclamation shows the same term again, one
      // revision up), in order.
      const seen: Array<number> = []
      const watching = (async () => {
        for await (const state of b.observe("svc")) {
          if (state !== undefined && !seen.includes(state.term)) seen.push(state.term)
          if (seen.length === 2) break
        }
      })()
      const first = yield* Effect.promise(() => a.campaign("svc", { value: "a" }))
      yield* Effect.promise(() => first.proclaim("a, later"))
      assert.strictEqual((yield* Effect.promise(() => b.leader("svc")))?.value, "a, later")
      const next = b.campaign("svc", { value: "b" })
      yield* Effect.sleep(100)
      yield* Effect.promise(() => first.resign())
      const second = yield* Effect.promise(() => next)
      assert.isAbove(second.term, first.term)
      yield* Effect.promise(() => watching)
      assert.deepStrictEqual(seen, [first.term, second.term])
      yield* Effect.promise(() => second[Symbol.asyncDispose]())
      assert.isUndefined(yield* Effect.promise(() => a.leader("svc")))
    })
  )
})
