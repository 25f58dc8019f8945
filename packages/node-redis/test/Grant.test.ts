// Release grants on real servers: a release hands the lock to the longest-waiting client, which then
// holds it without asking again; a grant nobody takes frees itself; an old or lost grant is never
// relied on as it comes.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { Lease, Lock, LockScripts } from "@sage/lock"
import { type AcquireReply, type Backend, LockBackend } from "@sage/lock/LockBackend"
import { RedisServer, ServerBinary } from "@sage/lock-testkit"
import { createClient } from "redis"
import * as NodeRedisBackend from "../src/NodeRedisBackend.ts"
import { clientOver, lockKeyOf, waitersRegistered as registeredVia } from "@sage/lock-testkit/contract/Handoff"

const waitersRegistered = (server: RedisServer.RedisServer, key: string, n: number) =>
  registeredVia(() => Effect.succeed(server), key, n)

/** The waiter ids registered for `key`, oldest first. */
const waiterIds = (server: RedisServer.RedisServer, key: string) =>
  Effect.map(server.command("ZRANGE", LockScripts.keysOf(lockKeyOf(key))[1], "0", "-1"), (ids) =>
    (ids as Array<string>).map(String)
  )

/** Polls until `waiterId` is subscribed to its grants for `key`. */
const subscribed = (server: RedisServer.RedisServer, key: string, waiterId: string) =>
  Effect.gen(function* () {
    const channel = LockScripts.grantChannel(lockKeyOf(key), waiterId)
    for (let i = 0; i < 500; i++) {
      const reply = (yield* server.command("PUBSUB", "NUMSUB", channel)) as Array<unknown>
      if (Number(reply[1]) >= 1) return
      yield* Effect.sleep(5)
    }
    return yield* Effect.die(`${waiterId} never subscribed to its grants for ${key}`)
  })

/**
 * A connection subscribed to `waiterId`'s grants for `key` that never acts on them: a waiter whose
 * process was alive when a release served it and died before it could claim.
 */
const deaf = (server: RedisServer.RedisServer, key: string, waiterId: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = createClient({ url: server.url })
      client.on("error", () => {})
      await client.connect()
      await client.subscribe(LockScripts.grantChannel(lockKeyOf(key), waiterId), () => {})
      return client
    }),
    (client) => Effect.promise(() => client.close().catch(() => undefined))
  )

/** The messages published on `waiterId`'s grant channel for `key`, as they arrive. */
const listen = (server: RedisServer.RedisServer, key: string, waiterId: string) =>
  Effect.gen(function* () {
    const heard: Array<string> = []
    yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const client = createClient({ url: server.url })
        client.on("error", () => {})
        await client.connect()
        await client.subscribe(LockScripts.grantChannel(lockKeyOf(key), waiterId), (message) => heard.push(message))
        return client
      }),
      (client) => Effect.promise(() => client.close().catch(() => undefined))
    )
    return heard
  })

/** Runs the release script as a client holding `token` would, publishing on `channel`. */
const releaseScript = (server: RedisServer.RedisServer, key: string, token: string, channel: string) =>
  server.command(
    "EVAL",
    LockScripts.release,
    "4",
    ...LockScripts.acquireKeysOf(lockKeyOf(key)),
    token,
    channel,
    "PUBLISH",
    "500"
  )

/** `backend`, recording in `sent` when each acquire request is sent (`performance.now()`). */
const recordingSends = (backend: Backend, sent: Array<number>): Backend => ({
  ...backend,
  acquire: (req) => Effect.suspend(() => (sent.push(performance.now()), backend.acquire(req)))
})

const request = (key: string, token: string, waiterId?: string) => ({
  key: lockKeyOf(key),
  token,
  leaseMillis: 30_000,
  timeoutMillis: 2_000,
  acknowledge: false,
  waiter: waiterId === undefined ? undefined : { id: waiterId, ttlMillis: 10_000 }
})

/** A request for 1 of semaphore `s`'s 2 permits. */
const semaphore = (token: string, waiterId?: string) => ({
  ...request("s", token, waiterId),
  permits: { count: 1, limit: 2 }
})

const fenceOf = (reply: AcquireReply) => (reply._tag === "Acquired" ? reply.fence : Number.NaN)

for (const flavor of ServerBinary.flavorsUnderTest()) {
  describe(`release grants on ${flavor}`, () => {
    it.live("a release hands the lock to the waiter of another process, which starts without asking again", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const a = yield* Effect.flatMap(NodeRedisBackend.make({ url: server.url }), clientOver)
        const backendB = yield* NodeRedisBackend.make({ url: server.url })
        // When each of b's acquire requests was sent.
        const sentByB: Array<number> = []
        const b = yield* clientOver(recordingSends(backendB, sentByB))
        // `a` holds the key until `b` is registered as waiting for it; `b`'s body reports what it saw.
        const handoff = Effect.gen(function* () {
          const inside = yield* Deferred.make<void>()
          let ids: Array<string> = []
          let releasedAt = 0
          const held = yield* Effect.forkChild(
            a.withLock("k", { waitTimeout: "5 seconds" })(
              Deferred.succeed(inside, undefined).pipe(
                Effect.andThen(waitersRegistered(server, "k", 1)),
                Effect.andThen(Effect.flatMap(waiterIds(server, "k"), (found) => Effect.sync(() => (ids = found)))),
                Effect.andThen(Effect.sync(() => (releasedAt = performance.now())))
              )
            )
          )
          yield* Deferred.await(inside)
          sentByB.length = 0
          const seen = yield* b.withLock("k", { waitTimeout: "5 seconds" })(
            Effect.gen(function* () {
              const startedAt = performance.now()
              const value = yield* server.command("GET", lockKeyOf("k"))
              const fence = yield* Lease.fencingToken
              // Held past the grant's 500 ms window: its renewal set the lock's own 30 s lease.
              yield* Effect.sleep(700)
              const pttl = Number(yield* server.command("PTTL", lockKeyOf("k")))
              const later = yield* server.command("GET", lockKeyOf("k"))
              return { value, fence, pttl, later, startedAt }
            })
          )
          yield* Fiber.join(held)
          return { ids, seen, sent: [...sentByB], releasedAt }
        })
        // The first wait subscribes to the key's channel, and tries again once subscribed (a release
        // may have come before): the grant is then taken by that attempt, and its message, which
        // found nobody waiting, counts as an early wake-up for a second. Later waits are woken.
        yield* handoff
        yield* Effect.sleep(1_100)
        // A grant is taken as it comes for the first third of its window's usable part (157 ms of
        // 500) after the release (as the server's clock dates it; at the latest, after the waiter's
        // last busy attempt): a body that starts within 150 ms of that attempt must have started on
        // the grant. A machine stalled for longer takes the grant with an acquire instead (correct,
        // but not what this test shows), so up to three handoffs are tried for one that was prompt.
        let prompt: Effect.Success<typeof handoff> | undefined
        const tried: Array<number> = []
        for (let i = 0; i < 3 && prompt === undefined; i++) {
          const result = yield* handoff
          const took = result.seen.startedAt - result.sent[result.sent.length - 1]!
          tried.push(Math.round(took))
          if (took < 150) prompt = result
        }
        assert.isDefined(prompt, `no prompt handoff (ms from the busy attempt to the body: ${tried.join(", ")})`)
        const { ids, releasedAt, seen, sent } = prompt!
        assert.strictEqual(ids.length, 1)
        assert.isTrue(ids[0]!.startsWith(LockScripts.grantingWaiterPrefix), ids[0])
        assert.strictEqual(seen.value, LockScripts.grantToken(ids[0]!, seen.fence), "held under the release's grant")
        assert.strictEqual(sent.length, 1, "one busy attempt, then the release handed the key over")
        assert.isBelow(sent[0]!, releasedAt)
        assert.strictEqual(seen.later, seen.value)
        assert.isAbove(seen.pttl, 20_000, "renewed to the lock's lease")
        assert.isNull(yield* server.command("GET", lockKeyOf("k")), "released with the grant's token")
      })
    )

    it.live(
      "a grant made long after the waiter's last busy attempt is held as it comes, never past the key's expiry",
      () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          const backend = yield* NodeRedisBackend.make({ url: server.url })
          // When each of the waiter's acquire requests was sent.
          const sent: Array<number> = []
          const c = yield* clientOver(recordingSends(backend, sent))
          yield* server.command("SET", lockKeyOf("k"), "holder", "PX", "30000")
          const waiting = yield* Effect.forkChild(
            c.withLock("k", { waitTimeout: "20 seconds" })(
              Effect.gen(function* () {
                // The key's expiry on the server first, then what the lock relies on: the lock's must
                // not be the later of the two.
                const pttl = Number(yield* server.command("PTTL", lockKeyOf("k")))
                const remaining = Duration.toMillis((yield* Lease.Lease).remaining)
                const value = String(yield* server.command("GET", lockKeyOf("k")))
                return { pttl, remaining, value }
              })
            )
          )
          // A registered waiter asks again every 0.5-1 s: right after one of its busy attempts, the
          // holder releases 400 ms later, before the next one.
          while (sent.length < 2) yield* Effect.sleep(2)
          const seen = sent.length
          while (sent.length === seen) yield* Effect.sleep(1)
          yield* Effect.sleep(400)
          const before = sent.length
          assert.strictEqual(yield* releaseScript(server, "k", "holder", LockScripts.wakeChannel(lockKeyOf("k"))), 1)
          const { pttl, remaining, value } = yield* Fiber.join(waiting)
          assert.isTrue(value.startsWith(LockScripts.grantingWaiterPrefix), `held under the release's grant: ${value}`)
          assert.strictEqual(sent.length, before, "taken as it came: no acquire after the release")
          assert.isAtMost(remaining, pttl + 1, "relied on no longer than the key lives on the server")
          // Counted from the release (the server's clock between the busy reply and the release), not
          // from the busy attempt 400 ms before it, which would leave under 75 ms.
          assert.isAbove(remaining, 150, `counted from the release: ${remaining} ms left, the key ${pttl} ms`)
        })
    )

    it.live("a waiter whose process is gone is passed over, keeps its place, and the next one is served at once", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const backend = yield* NodeRedisBackend.make({ url: server.url })
        const c = yield* Effect.flatMap(NodeRedisBackend.make({ url: server.url }), clientOver)
        yield* server.command("SET", lockKeyOf("k"), "holder", "PX", "30000")
        // A granting waiter registers, then its process dies: nothing listens for its grants.
        const busy = yield* backend.acquire(request("k", "dead-token", "g.dead"))
        assert.strictEqual(busy._tag, "Busy")
        assert.isAbove(
          busy._tag === "Busy" ? (busy.fenceFloor ?? 0) : 0,
          0,
          "a registering attempt reports the fence floor"
        )
        const done = yield* Deferred.make<void>()
        const waiting = yield* Effect.forkChild(
          c.withLock("k", { waitTimeout: "10 seconds" })(
            Effect.flatMap(
              Effect.sync(() => performance.now()),
              (startedAt) => Effect.as(Deferred.await(done), startedAt)
            )
          )
        )
        yield* waitersRegistered(server, "k", 2)
        const [, live] = yield* waiterIds(server, "k")
        yield* subscribed(server, "k", live!)
        assert.strictEqual(yield* releaseScript(server, "k", "holder", LockScripts.wakeChannel(lockKeyOf("k"))), 1)
        const releasedAt = performance.now()
        const granted = String(yield* server.command("GET", lockKeyOf("k")))
        assert.isTrue(granted.startsWith(`${live}:`), `the live waiter is served: ${granted}`)
        assert.deepStrictEqual(
          yield* waiterIds(server, "k"),
          ["g.dead"],
          "the gone one keeps its place until it lapses"
        )
        yield* Deferred.succeed(done, undefined)
        const startedAt = yield* Fiber.join(waiting)
        assert.isBelow(startedAt - releasedAt, 1_000, "no claim window was spent on the gone waiter")
      })
    )

    it.live("a grant to a waiter that dies after its message holds up the line for the claim window at most", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const backend = yield* NodeRedisBackend.make({ url: server.url })
        const c = yield* Effect.flatMap(NodeRedisBackend.make({ url: server.url }), clientOver)
        yield* server.command("SET", lockKeyOf("k"), "holder", "PX", "30000")
        // A granting waiter registers and listens, and will never claim what it is handed.
        yield* backend.acquire(request("k", "dead-token", "g.dead"))
        yield* deaf(server, "k", "g.dead")
        const waiting = yield* Effect.forkChild(
          c.withLock("k", { waitTimeout: "10 seconds" })(
            Effect.zip(
              Lease.fencingToken,
              Effect.sync(() => performance.now())
            )
          )
        )
        yield* waitersRegistered(server, "k", 2)
        const [, live] = yield* waiterIds(server, "k")
        yield* subscribed(server, "k", live!)
        // What the live waiter hears, on a connection of the test's own beside the waiter's.
        const heard = yield* listen(server, "k", live!)
        assert.strictEqual(yield* releaseScript(server, "k", "holder", LockScripts.wakeChannel(lockKeyOf("k"))), 1)
        const releasedAt = performance.now()
        const granted = String(yield* server.command("GET", lockKeyOf("k")))
        assert.isTrue(granted.startsWith("g.dead:"), granted)
        const pttl = Number(yield* server.command("PTTL", lockKeyOf("k")))
        assert.isAtMost(pttl, 500, "a grant lasts the claim window")
        const [fence, startedAt] = yield* Fiber.join(waiting)
        assert.deepStrictEqual(heard.slice(0, 1), [`${live}:next:500`], "the next waiter is told when the window ends")
        assert.isAtLeast(startedAt - releasedAt, 450, "the grant's window was respected")
        assert.isBelow(startedAt - releasedAt, 2_500, "the next waiter got the key after the window")
        assert.isAbove(fence, Number(granted.slice("g.dead:".length)), "with a newer fence")
      })
    )

    it.live("a waiter that gives up frees a grant it did not take, which passes to the next waiter", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const backend = yield* NodeRedisBackend.make({ url: server.url })
        yield* server.command("SET", lockKeyOf("k"), "holder", "PX", "30000")
        yield* backend.acquire(request("k", "t1", "g.first"))
        yield* backend.acquire(request("k", "t2", "g.second"))
        yield* deaf(server, "k", "g.first")
        yield* deaf(server, "k", "g.second")
        assert.strictEqual(yield* releaseScript(server, "k", "holder", LockScripts.wakeChannel(lockKeyOf("k"))), 1)
        const first = String(yield* server.command("GET", lockKeyOf("k")))
        assert.isTrue(first.startsWith("g.first:"), first)
        yield* backend.wakeups!.leave(lockKeyOf("k"), "g.first", 1_000)
        const second = String(yield* server.command("GET", lockKeyOf("k")))
        assert.isTrue(second.startsWith("g.second:"), second)
        assert.isAbove(Number(second.split(":")[1]), Number(first.split(":")[1]))
        yield* backend.wakeups!.leave(lockKeyOf("k"), "g.second", 1_000)
        assert.isNull(yield* server.command("GET", lockKeyOf("k")), "nobody left to hand it to")
      })
    )

    it.live("a grant whose message was lost is taken by the waiter's next attempt, with the grant's fence", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const backend = yield* NodeRedisBackend.make({ url: server.url })
        yield* server.command("SET", lockKeyOf("k"), "holder", "PX", "30000")
        yield* backend.acquire(request("k", "mine", "g.w"))
        yield* deaf(server, "k", "g.w")
        yield* releaseScript(server, "k", "holder", LockScripts.wakeChannel(lockKeyOf("k")))
        const granted = String(yield* server.command("GET", lockKeyOf("k")))
        const reply = yield* backend.acquire(request("k", "mine", "g.w"))
        assert.deepStrictEqual(reply, { _tag: "Acquired", fence: Number(granted.split(":")[1]) })
        assert.strictEqual(yield* server.command("GET", lockKeyOf("k")), "mine")
        assert.isAbove(Number(yield* server.command("PTTL", lockKeyOf("k"))), 20_000, "with the caller's lease")
        // Another waiter's attempt finds the key held, whoever it was granted to.
        yield* server.command("SET", lockKeyOf("k"), "g.w:1", "PX", "30000")
        assert.strictEqual((yield* backend.acquire(request("k", "other", "g.other")))._tag, "Busy")
      })
    )

    it.live(
      "semaphore permits reserved for a waiter id are taken by a later call of it with a token above grants since",
      () =>
        Effect.gen(function* () {
          const server = yield* RedisServer.start({ flavor })
          const backend = yield* NodeRedisBackend.make({ url: server.url })
          yield* backend.acquire(semaphore("h1"))
          yield* backend.acquire(semaphore("h2"))
          // Full: a call of waiter id g.w registers, then gives up; its process still listens.
          assert.strictEqual((yield* backend.acquire(semaphore("w1", "g.w")))._tag, "Busy")
          yield* deaf(server, "s", "g.w")
          // h1's permit is reserved for g.w; h2's goes to a newcomer, with a newer token.
          yield* backend.release(semaphore("h1"))
          yield* backend.release(semaphore("h2"))
          const newcomer = fenceOf(yield* backend.acquire(semaphore("h3")))
          // A later call of the same waiter id takes the reservation: its token must be newer still,
          // or a resource fenced by h3's token would turn it away while it holds its permit.
          const later = fenceOf(yield* backend.acquire(semaphore("w2", "g.w")))
          assert.isAbove(later, newcomer)
        })
    )

    it.live("a grant older than the waiter's last busy reply is not relied on", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        const b = yield* Effect.flatMap(NodeRedisBackend.make({ url: server.url }), clientOver)
        yield* server.command("SET", lockKeyOf("k"), "holder", "PX", "30000")
        let startedAt = 0
        const waiting = yield* Effect.forkChild(
          b.withLock("k", { waitTimeout: "10 seconds" })(Effect.sync(() => (startedAt = performance.now())))
        )
        yield* waitersRegistered(server, "k", 1)
        const [id] = yield* waiterIds(server, "k")
        yield* subscribed(server, "k", id!)
        // Registered again after its subscription was in place: it now waits for a message.
        yield* Effect.sleep(50)
        // A message from a grant made before the waiter's attempt (its fence is below the floor):
        // the key is still someone else's.
        yield* server.command("PUBLISH", LockScripts.grantChannel(lockKeyOf("k"), id!), `${id}:1:500`)
        yield* Effect.sleep(300)
        assert.strictEqual(startedAt, 0, "the waiter did not start on an old grant")
        assert.strictEqual(yield* server.command("GET", lockKeyOf("k")), "holder")
        yield* waitersRegistered(server, "k", 1)
        assert.strictEqual(yield* releaseScript(server, "k", "holder", LockScripts.wakeChannel(lockKeyOf("k"))), 1)
        const releasedAt = performance.now()
        yield* Fiber.join(waiting)
        assert.isAbove(startedAt, releasedAt - 1, "it started once the real release came")
      })
    )

    it.live("a grant whose release failed is not taken again with its fencing token by the same client", () =>
      Effect.gen(function* () {
        const server = yield* RedisServer.start({ flavor })
        yield* server.command("ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all")
        const url = server.url.replace("redis://", "redis://locker:pw@")
        const lease = { namespace: "wake", leaseDuration: "3 seconds" } as const
        const a = yield* Effect.flatMap(NodeRedisBackend.make({ url }), (backend) =>
          Lock.make(lease).pipe(Effect.provideService(LockBackend, backend))
        )
        const b = yield* Effect.flatMap(NodeRedisBackend.make({ url }), (backend) =>
          Lock.make(lease).pipe(Effect.provideService(LockBackend, backend))
        )
        const setRules = (...rules: ReadonlyArray<string>) => server.command("ACL", "SETUSER", "locker", ...rules)
        // `a` holds the key until `b` waits; `b` then holds it under the release's grant when the
        // hand-off is prompt (otherwise under its own token: try again). Under a grant, `b` keeps the
        // key past its first renewal, then loses its scripts: its renewal fails (LockLost) and so
        // does its release, and the key still holds the grant's token when the scripts come back.
        const round = Effect.gen(function* () {
          const inside = yield* Deferred.make<void>()
          const held = yield* Effect.forkChild(
            a.withLock("k", { waitTimeout: "5 seconds" })(
              Deferred.succeed(inside, undefined).pipe(Effect.andThen(waitersRegistered(server, "k", 1)))
            )
          )
          yield* Deferred.await(inside)
          const seen = yield* b
            .withLock("k", { waitTimeout: "5 seconds" })(
              Effect.gen(function* () {
                const fence = yield* Lease.fencingToken
                const value = String(yield* server.command("GET", lockKeyOf("k")))
                if (!value.endsWith(`:${fence}`)) return { fence, granted: false }
                yield* Effect.sleep(700)
                yield* setRules("-evalsha", "-eval")
                yield* Effect.never
                return { fence, granted: true }
              })
            )
            .pipe(
              Effect.catchTag("LockLost", () =>
                Effect.gen(function* () {
                  const value = String(yield* server.command("GET", lockKeyOf("k")))
                  return { fence: Number(value.slice(value.lastIndexOf(":") + 1)), granted: true }
                })
              ),
              Effect.ensuring(Effect.orDie(setRules("+evalsha", "+eval")))
            )
          yield* Fiber.join(held)
          return seen
        })
        yield* round
        yield* Effect.sleep(1_100)
        let lost: { readonly fence: number; readonly granted: boolean } | undefined
        for (let i = 0; i < 4 && lost === undefined; i++) {
          const seen = yield* round
          if (seen.granted) lost = seen
          else yield* Effect.sleep(1_100)
        }
        assert.isDefined(lost, "no hand-off was prompt enough to be held under its grant")
        assert.isNotNull(yield* server.command("GET", lockKeyOf("k")), "the lost grant is still on the server")
        const next = yield* b.withLock("k", { waitTimeout: "5 seconds" })(Lease.fencingToken)
        assert.isAbove(next, lost!.fence, "the next grant of the same client has a greater fencing token")
      })
    )
  })
}
