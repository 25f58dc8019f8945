// One process of the process-exit test (exit.test.ts): a one-shot program that builds the lock layer
// over one backend, takes a few locks (one of them waited for at the server, behind another client),
// and then simply returns, without `process.exit`. Nothing of the lock's should be left to keep the
// process alive: the test measures how long after the last lock call the process exits.
//
// It prints, one line each:
//   `work-ended <ns>`    when its last lock call ended (the host's monotonic clock, `process.hrtime`,
//                        which the parent reads too)
//   `during <json>`      what was open while the layer was still up (the wake-up subscriber shows there)
//   `closed <ns>`        when the layer had been closed (the runtime disposed, the app's client closed)
//   `resources <json>`   what still keeps the event loop alive once the program has returned, then
//                        every second until the process exits: a test failure says what held it
// (Node lists the process's own stdout and stderr pipes to the parent as two `PipeWrap`: they never
// hold it.)
//
// The ioredis cases load that package's backend by its file (this package cannot depend on the one
// built on it).
//
// Run as `node --conditions=@sage/source exitWorker.ts <case> <json>`; `<json>` holds `namespace` and
// what the case connects to (`url`, `sentinel: { name, sentinels }`, `rootNodes`).
import { NodeRedis, NodeRuntime } from "@effect/platform-node"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { createHook } from "node:async_hooks"
import { Lock, PromiseClient } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import * as MemoryBackend from "@sage/lock/MemoryBackend"
import { createClient } from "redis"
import * as EffectRedisBackend from "../src/EffectRedisBackend.ts"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"

/** How the program is run, and over which backend. */
export type Case =
  | "memory"
  | "standalone"
  | "fromClient"
  | "effectRedis"
  | "sentinel"
  | "cluster"
  | "managedRuntime"
  | "runMain"
  | "promiseClient"
  | "ioredis"
  | "ioredisSentinel"
  | "ioredisCluster"

export interface Target {
  readonly namespace: string
  readonly url?: string | undefined
  readonly sentinel?:
    { readonly name: string; readonly sentinels: ReadonlyArray<{ host: string; port: number }> } | undefined
  readonly rootNodes?: ReadonlyArray<{ readonly url: string }> | undefined
}

// Which timers are pending, and for how long each was set: `getActiveResourcesInfo` names a timer
// only "Timeout", and its duration is what tells a renewal period (10 s here) from a sweep or a
// command's limit. Only timers still referenced keep the process alive, so only those are listed.
interface TimerLike {
  readonly _idleTimeout?: number
  readonly _destroyed?: boolean
  readonly _repeat?: number | null
  hasRef(): boolean
}
const timers = new Map<number, TimerLike>()
createHook({
  init: (id, type, _trigger, resource) => {
    if (type === "Timeout") timers.set(id, resource as TimerLike)
  },
  destroy: (id) => void timers.delete(id)
}).enable()

// Sockets by peer: `_getActiveHandles` is undocumented, but nothing documented names a socket's peer.
interface SocketLike {
  readonly constructor: { readonly name: string }
  readonly remoteAddress?: string
  readonly remotePort?: number
}
const handles = (): Array<SocketLike> =>
  (process as unknown as { _getActiveHandles?: () => Array<SocketLike> })._getActiveHandles?.() ?? []

/** What keeps the event loop alive now: Node's summary, referenced timers by duration, sockets by peer. */
const resources = () => ({
  active: process.getActiveResourcesInfo(),
  timers: [...timers.values()]
    .filter((timer) => timer._destroyed !== true && timer.hasRef())
    .map((timer) => `${timer._repeat ? "interval" : "timeout"} ${timer._idleTimeout} ms`),
  sockets: handles()
    .filter((handle) => handle.remotePort !== undefined)
    .map((handle) => `${handle.constructor.name} to ${handle.remoteAddress}:${handle.remotePort}`)
})

const print = (line: string): void => void process.stdout.write(`${line}\n`)
const now = (): bigint => process.hrtime.bigint()

const [kind, json] = process.argv.slice(2) as [Case, string]
const target = JSON.parse(json) as Target
const { namespace } = target

/**
 * A lone call; two fibers of this client on one key (the second waits in process, and is handed
 * the lock); then a key another client holds, which this one waits for at the server and is woken
 * for by the holder's release (the wake-up subscriber; on Sentinel and Cluster, acknowledged
 * acquisitions through the dedicated pool).
 */
const program = Effect.gen(function* () {
  yield* Lock.withLock("solo", { waitTimeout: "5 seconds" })(Effect.void)
  const turn = Lock.withLock("turns", { waitTimeout: "5 seconds" })(Effect.sleep("50 millis"))
  yield* Effect.all([turn, turn], { concurrency: "unbounded", discard: true })
  // Another process, as far as the server can tell: its own lock client, so its own waiter id. Made in
  // the program's scope, which closes before the layer does.
  const other = yield* Lock.make({ namespace })
  const inside = yield* Deferred.make<void>()
  const holder = yield* Effect.forkChild(
    other.withLock("shared", { waitTimeout: "5 seconds" })(
      Deferred.succeed(inside, undefined).pipe(Effect.andThen(Effect.sleep("300 millis")))
    )
  )
  yield* Deferred.await(inside)
  yield* Lock.withLock("shared", { waitTimeout: "10 seconds" })(Effect.void)
  yield* Fiber.join(holder)
  print(`work-ended ${now()}`)
  print(`during ${JSON.stringify(resources())}`)
}).pipe(Effect.scoped)

// The lock layer, with the backend beside it: the program makes a second client over it.
const lockOver = <E, R>(backend: Layer.Layer<LockBackend, E, R>) =>
  Lock.layer({ namespace }).pipe(Layer.provideMerge(backend))

const standalone = () => lockOver(NodeRedisBackend.layer({ url: target.url! }))

/** What the ioredis cases use of `@sage/lock-ioredis`'s `IoredisBackend`. */
interface IoredisBackendModule {
  readonly layer: (options: object) => Layer.Layer<LockBackend, unknown>
  readonly layerCluster: (nodes: ReadonlyArray<{ host: string; port: number }>) => Layer.Layer<LockBackend, unknown>
}
const ioredisBackend = (): Promise<IoredisBackendModule> =>
  import(new URL("../../ioredis/src/IoredisBackend.ts", import.meta.url).href) as Promise<IoredisBackendModule>

/** What remains, right after the program returned (two turns of the loop) and then every second. */
const watch = (): void => {
  print(`closed ${now()}`)
  setImmediate(() =>
    setImmediate(() => {
      print(`resources ${JSON.stringify(resources())}`)
      // Unreferenced: the watch must not itself keep the process alive.
      setInterval(() => print(`resources ${JSON.stringify(resources())}`), 1_000).unref()
    })
  )
}

const failed = (error: unknown): void => {
  process.stderr.write(`${String(error)}\n`)
  process.exitCode = 1
}

const run = async (): Promise<void> => {
  switch (kind) {
    case "memory":
      return Effect.runPromise(program.pipe(Effect.provide(lockOver(MemoryBackend.layer))))
    case "standalone":
      return Effect.runPromise(program.pipe(Effect.provide(standalone())))
    case "fromClient": {
      // The application's own client: the lock uses it and never closes it; the application does.
      const client = createClient({ url: target.url! })
      client.on("error", () => {})
      await client.connect()
      try {
        await Effect.runPromise(program.pipe(Effect.provide(lockOver(NodeRedisBackend.layerFromClient(client)))))
      } finally {
        await client.close()
      }
      return
    }
    case "effectRedis":
      return Effect.runPromise(
        program.pipe(
          Effect.provide(
            lockOver(EffectRedisBackend.layer({ wakeups: true })).pipe(
              Layer.provide(NodeRedis.layer({ url: target.url! }))
            )
          )
        )
      )
    case "sentinel":
      return Effect.runPromise(program.pipe(Effect.provide(lockOver(NodeRedisBackend.layerSentinel(target.sentinel!)))))
    case "cluster":
      return Effect.runPromise(
        program.pipe(Effect.provide(lockOver(NodeRedisBackend.layerCluster({ rootNodes: [...target.rootNodes!] }))))
      )
    case "ioredis": {
      const { hostname, port } = new URL(target.url!)
      const IoredisBackend = await ioredisBackend()
      return Effect.runPromise(
        program.pipe(Effect.provide(lockOver(IoredisBackend.layer({ host: hostname, port: Number(port) }))))
      )
    }
    case "ioredisSentinel": {
      const IoredisBackend = await ioredisBackend()
      const { name, sentinels } = target.sentinel!
      return Effect.runPromise(
        program.pipe(Effect.provide(lockOver(IoredisBackend.layer({ sentinels: [...sentinels], name }))))
      )
    }
    case "ioredisCluster": {
      const IoredisBackend = await ioredisBackend()
      const nodes = target.rootNodes!.map(({ url }) => {
        const { hostname, port } = new URL(url)
        return { host: hostname, port: Number(port) }
      })
      return Effect.runPromise(program.pipe(Effect.provide(lockOver(IoredisBackend.layerCluster(nodes)))))
    }
    case "managedRuntime": {
      const runtime = ManagedRuntime.make(standalone())
      try {
        await runtime.runPromise(program)
      } finally {
        await runtime.dispose()
      }
      return
    }
    case "promiseClient": {
      // Code outside Effect: every kind of call of the Promise client, then `close()`.
      const client = PromiseClient.make(NodeRedisBackend.layer({ url: target.url! }), {
        lock: { namespace },
        semaphore: { namespace },
        election: { namespace }
      })
      await client.using("solo", { waitTimeout: 5_000 }, async () => {})
      await client.tryUsing("try", async () => {})
      // What `await using` calls at the end of its block (Node 22 does not parse `await using` yet).
      const held = await client.acquire("held", { waitTimeout: 5_000 })
      await held[Symbol.asyncDispose]()
      await client.withPermits("pool", { limit: 2, waitTimeout: 5_000 }, async () => {})
      const lead = await client.campaign("leader")
      for await (const state of client.observe("leader")) if (state?.term === lead.term) break
      await lead.resign()
      print(`work-ended ${now()}`)
      print(`during ${JSON.stringify(resources())}`)
      await client.close()
      return
    }
    case "runMain":
      // runMain keeps the process alive until the program ends, and exits by itself only on a
      // failure (which it reports) or a signal: a program that succeeds leaves the exit to the
      // event loop.
      return new Promise<void>((resolve) =>
        NodeRuntime.runMain(program.pipe(Effect.provide(standalone()), Effect.ensuring(Effect.sync(resolve))))
      )
  }
}

run().then(watch, failed)
