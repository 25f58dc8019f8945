// The smoke test a user would write first, in plain JavaScript, run by plain `node` against the
// installed tarballs: it starts a throwaway redis-server, then checks that one lock excludes a second
// holder, that `tryWithLock` reports a busy key, and that the lock is free again after release; the
// same through the Promise API; the ioredis backend beside the node-redis one (a lock held through
// one excludes the other: the protocol is the same); and that the installed `sage-lock` executable
// sees a held lock (run at every version set it is given).
import { execFile, spawn } from "node:child_process"
import { createServer, connect } from "node:net"
import { Effect, Layer, Option } from "effect"
import { Lock, LockError, PromiseClient } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import { IoredisAdmin, IoredisBackend, IoredisFencedWrite } from "@sage/lock-ioredis"
import { Redis } from "ioredis"

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const answers = (port) =>
  new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.end()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

const port = await freePort()
const bin = process.env.REDIS_SERVER_BIN || "redis-server"
const server = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
  stdio: "ignore"
})
server.once("error", (error) => {
  console.error(`consumer: cannot start ${bin}: ${error.message}`)
  process.exit(1)
})
try {
  const deadline = Date.now() + 10_000
  while (!(await answers(port))) {
    if (Date.now() > deadline) throw new Error(`${bin} did not listen on ${port}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }

  // The executable npm linked, with this program's server and namespace; its JSON, or its failure.
  const sageLock = (args) =>
    new Promise((resolve) => {
      const flags = ["--url", `redis://127.0.0.1:${port}`, "--namespace", "consumer-smoke", "--timeout", "5"]
      execFile("./node_modules/.bin/sage-lock", [...args, ...flags], (error, stdout, stderr) =>
        resolve(error === null ? JSON.parse(stdout) : `sage-lock failed: ${stderr || error.message}`)
      )
    })

  const LockLive = Lock.layer({ leaseDuration: "5 seconds", namespace: "consumer-smoke" }).pipe(
    Layer.provide(NodeRedisBackend.layer({ url: `redis://127.0.0.1:${port}` }))
  )

  const program = Effect.gen(function* () {
    const whileHeld = yield* Effect.succeed("inside").pipe(
      Lock.withLock("job", { waitTimeout: "2 seconds" }),
      Effect.andThen((inside) =>
        Effect.succeed(2).pipe(
          Lock.tryWithLock("job"),
          Effect.map((busy) => [inside, busy])
        )
      ),
      Lock.withLock("outer", { waitTimeout: "2 seconds" })
    )
    const nested = yield* Effect.succeed("second").pipe(
      Lock.tryWithLock("job"),
      Lock.withLock("job", { waitTimeout: "2 seconds" }),
      Effect.map(Option.isNone)
    )
    const timedOut = yield* Effect.never.pipe(
      Lock.withLock("held", { waitTimeout: "100 millis" }),
      Effect.forkChild,
      Effect.andThen(Effect.sleep("200 millis")),
      Effect.andThen(Effect.void.pipe(Lock.withLock("held", { waitTimeout: "200 millis" }), Effect.flip))
    )
    const afterRelease = yield* Effect.succeed(3).pipe(Lock.tryWithLock("job"))
    const inspected = yield* Effect.promise(() => sageLock(["inspect", "job", "--json"])).pipe(
      Lock.withLock("job", { waitTimeout: "2 seconds" })
    )
    return { whileHeld, nested, timedOut, afterRelease, inspected }
  })

  const result = await Effect.runPromise(program.pipe(Effect.provide(LockLive)))
  const failures = []

  // The same from async code, through the Promise API.
  const locks = PromiseClient.make(NodeRedisBackend.layer({ url: `redis://127.0.0.1:${port}` }), {
    lock: { namespace: "consumer-promise", leaseDuration: "5 seconds" }
  })
  try {
    const value = await locks.using("job", { waitTimeout: 2_000 }, async (signal, lease) =>
      signal.aborted ? "aborted" : lease.fencingToken > 0 ? "inside" : "no token"
    )
    if (value !== "inside") failures.push(`PromiseClient.using returned ${value}`)
    const held = await locks.acquire("job", { waitTimeout: 2_000 })
    const busy = await locks.tryUsing("job", async () => "ran")
    if (busy.acquired !== false) failures.push("PromiseClient.tryUsing ran while the key was held")
    const timedOut = await locks.using("job", { waitTimeout: 100 }, async () => "ran").catch((error) => error)
    if (!(timedOut instanceof LockError.TimedOut))
      failures.push(`expected a TimedOut rejection, got ${String(timedOut)}`)
    await held[Symbol.asyncDispose]()
    const free = await locks.tryUsing("job", async () => "ran")
    if (free.acquired !== true) failures.push("the key stayed locked after the handle was disposed")
  } finally {
    await locks.close()
  }
  // ioredis: the Promise API over the backend's own connections, and an Effect program over a client
  // the application owns, while node-redis holds the same key.
  const ioLocks = PromiseClient.make(IoredisBackend.layer({ host: "127.0.0.1", port }), {
    lock: { namespace: "consumer-promise", leaseDuration: "5 seconds" }
  })
  const ioredis = new Redis({ host: "127.0.0.1", port })
  try {
    const value = await ioLocks.using("io-job", { waitTimeout: 2_000 }, async (_signal, lease) => lease.fencingToken)
    if (!(value > 0)) failures.push(`ioredis: PromiseClient.using returned ${value}`)
    const nodeRedisLocks = PromiseClient.make(NodeRedisBackend.layer({ url: `redis://127.0.0.1:${port}` }), {
      lock: { namespace: "consumer-promise", leaseDuration: "5 seconds" }
    })
    try {
      const held = await nodeRedisLocks.acquire("shared-job", { waitTimeout: 2_000 })
      const busy = await ioLocks.tryUsing("shared-job", async () => "ran")
      if (busy.acquired !== false) failures.push("ioredis: took a key that node-redis held")
      await held.release()
      const free = await ioLocks.tryUsing("shared-job", async () => "ran")
      if (free.acquired !== true) failures.push("ioredis: the key stayed locked after node-redis released it")
    } finally {
      await nodeRedisLocks.close()
    }
    const fromClient = await Effect.runPromise(
      Effect.succeed("inside").pipe(
        Lock.withLock("io-effect", { waitTimeout: "2 seconds" }),
        Effect.provide(
          Lock.layer({ namespace: "consumer-smoke" }).pipe(Layer.provide(IoredisBackend.layerFromClient(ioredis)))
        )
      )
    )
    if (fromClient !== "inside") failures.push(`ioredis: withLock over the application's client returned ${fromClient}`)
    if ((await ioredis.ping()) !== "PONG") failures.push("ioredis: the application's client was closed by the lock")
    // A fenced write over ioredis: a newer token writes, an older one is refused.
    const fenced = await Effect.runPromise(
      Effect.all([
        IoredisFencedWrite.set(ioredis, { key: "{consumer}:data", value: "new", fencingToken: 20 }),
        IoredisFencedWrite.set(ioredis, { key: "{consumer}:data", value: "old", fencingToken: 19 })
      ])
    )
    if (fenced[0]._tag !== "Written" || fenced[1]._tag !== "Stale") {
      failures.push(`ioredis: FencedWrite.set gave ${JSON.stringify(fenced)}`)
    }
    // The admin functions over the same client see a lock held through it.
    const seen = await Effect.runPromise(
      Effect.succeed("inside").pipe(
        Effect.andThen(IoredisAdmin.inspectLock(ioredis, "consumer-smoke:{io-admin}")),
        Lock.withLock("io-admin", { waitTimeout: "2 seconds" }),
        Effect.provide(
          Lock.layer({ namespace: "consumer-smoke" }).pipe(Layer.provide(IoredisBackend.layerFromClient(ioredis)))
        )
      )
    )
    if (seen.held !== true) failures.push(`ioredis: IoredisAdmin.inspectLock saw ${JSON.stringify(seen)}`)
  } finally {
    await ioLocks.close()
    await ioredis.quit()
  }

  if (result.whileHeld[0] !== "inside") failures.push("withLock did not return the body's value")
  if (!Option.isSome(result.whileHeld[1])) failures.push("tryWithLock on a free key did not run")
  if (result.nested !== true) failures.push("tryWithLock ran while the same key was held")
  if (!(result.timedOut instanceof LockError.TimedOut))
    failures.push(`expected TimedOut, got ${String(result.timedOut)}`)
  if (!Option.isSome(result.afterRelease) || result.afterRelease.value !== 3) failures.push("the key stayed locked")
  if (result.inspected?.held !== true || result.inspected.key !== "job")
    failures.push(`sage-lock inspect did not see the held lock: ${JSON.stringify(result.inspected)}`)
  if (failures.length > 0) {
    console.error(`consumer: ${failures.join("; ")}`)
    process.exitCode = 1
  } else {
    console.log("consumer: plain node against the tarballs: ok")
  }
} finally {
  server.kill("SIGKILL")
}
