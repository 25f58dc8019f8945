// Scenarios aimed at the waiting machinery: waiter registrations at the server, hand-offs from one
// holder to the next (in-process transfers, a release's grant to another process) and the wake-up
// subscriptions. Listed in scenarios.ts with the rest.
import * as Effect from "effect/Effect"
import { LockScripts } from "@sage/lock"
import { type RedisServer, TestkitError } from "@sage/lock-testkit"
import { monotonicMicros } from "./protocol.ts"
import type { FaultContext, Scenario, WorkerView } from "./scenario.ts"
import { setWorkersAcl } from "./injection.ts"
import { registrationLifetimeMillis } from "./serverState.ts"

const injectionFailed = (message: string) => new TestkitError.TestkitError({ reason: "Timeout", message })

/** A moment at which one worker holds `redisKey` and others wait for it. */
interface Crowd {
  readonly redisKey: string
  readonly holder: number
  /** The holder's body ends in this many ms. */
  readonly remainingMillis: number
  /** Workers (not the holder) with a call waiting for the key, the longest-waiting first. */
  readonly waiters: ReadonlyArray<number>
}

/**
 * A key held by a body that ends soon (so the release comes while the registrations of killed
 * waiters are still fresh: they would lapse within a registration lifetime) but not at once, with at
 * least `waiters` other workers waiting for it for 30 ms or more (long enough for a first attempt to
 * have registered them).
 */
const crowdOf = (views: ReadonlyArray<WorkerView>, redisKeys: ReadonlyArray<string>, waiters: number) => {
  const now = monotonicMicros()
  for (const redisKey of redisKeys) {
    for (const holder of views) {
      if (!holder.alive) continue
      const body = holder.inBody.find((b) => b.redisKey === redisKey)
      if (body === undefined) continue
      const remainingMillis = (body.enteredAt + body.bodyMillis * 1000 - now) / 1000
      if (remainingMillis < 60 || remainingMillis > 400) continue
      const waiting = views
        .filter((view) => view.alive && view.worker !== holder.worker)
        .flatMap((view) => {
          const since = view.waiting
            .filter((w) => w.redisKey === redisKey && now - w.since >= 30_000)
            .map((w) => w.since)
          return since.length === 0 ? [] : [{ worker: view.worker, since: Math.min(...since) }]
        })
        .toSorted((a, b) => a.since - b.since)
      if (waiting.length >= waiters) {
        const crowd: Crowd = { redisKey, holder: holder.worker, remainingMillis, waiters: waiting.map((w) => w.worker) }
        return crowd
      }
    }
  }
  return undefined
}

/** How many waiters a lock's queue holds now (`<lock key>:waiters`, docs/admin.md). */
const registered = (master: RedisServer.RedisServer, redisKey: string) =>
  Effect.map(master.command("ZCARD", LockScripts.keysOf(redisKey)[1]), Number)

const killWaiters = (context: FaultContext) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 15_000
    for (;;) {
      if (Date.now() > deadline) {
        return yield* injectionFailed("no moment with a holder about to release and three waiting workers within 15 s")
      }
      const crowd = crowdOf(yield* context.workers, context.redisKeys, 3)
      const master = crowd === undefined ? undefined : yield* context.deployment.masterFor(crowd.redisKey)
      const queued = crowd === undefined || master === undefined ? 0 : yield* registered(master, crowd.redisKey)
      if (crowd === undefined || queued < crowd.waiters.length) {
        yield* Effect.sleep(5)
        continue
      }
      // The waiter that came last stays: it is the most likely to be behind the others in line, so
      // the release has dead waiters to get past before it reaches a live one.
      const victims = crowd.waiters.slice(0, -1)
      yield* Effect.forEach(victims, context.killWorker, { discard: true })
      yield* context.note(
        `killed waiting workers ${victims.join(", ")} of ${crowd.redisKey} (${queued} registered) while worker ` +
          `${crowd.holder} held it for ${Math.round(crowd.remainingMillis)} ms more; worker ${crowd.waiters.at(-1)} waits on`
      )
      return
    }
  })

/** A key's value now, to tell a release's grant (`<g. waiter id>:<fence>`) from an ordinary token. */
const grantedByRelease = (context: FaultContext, redisKey: string) =>
  Effect.map(
    Effect.flatMap(context.deployment.masterFor(redisKey), (master) => master.command("GET", redisKey)),
    (value) => typeof value === "string" && value.startsWith(LockScripts.grantingWaiterPrefix)
  )

const killAfterHandOff = (context: FaultContext, sameWorker: boolean) =>
  Effect.gen(function* () {
    const handOff = yield* context.nextHandOff({ withinMillis: 20, sameWorker }).pipe(
      Effect.timeoutOrElse({
        duration: 15_000,
        orElse: () =>
          Effect.fail(injectionFailed(`no ${sameWorker ? "in-process" : "cross-process"} hand-off within 15 s`))
      })
    )
    yield* context.killWorker(handOff.worker)
    const killedAfter = (monotonicMicros() - handOff.enteredAt) / 1000
    const granted = yield* grantedByRelease(context, handOff.redisKey)
    yield* context.note(
      `killed worker ${handOff.worker} ${killedAfter.toFixed(1)} ms into ${handOff.call} on ${handOff.redisKey}, whose body ` +
        `entered ${handOff.gapMillis.toFixed(1)} ms after worker ${handOff.fromWorker}'s left ` +
        `(${granted ? "the key holds a release's grant" : "the key holds a plain token"})`
    )
    // The key is the dead holder's until its lease runs out; then the others must take it.
    yield* Effect.sleep(context.leaseMillis + 500)
  })

/** Every node's counters that show a client retrying subscriptions or connections in a loop. */
const loopCounters = (nodes: ReadonlyArray<RedisServer.RedisServer>) =>
  Effect.map(
    Effect.forEach(nodes, (node) =>
      Effect.map(node.command("INFO", "stats", "commandstats"), (reply) => {
        const text = String(reply)
        const field = (name: string): number => Number(new RegExp(`${name}:(\\d+)`).exec(text)?.[1] ?? 0)
        const stat = (command: string, name: string): number =>
          Number(new RegExp(`cmdstat_${command}:.*\\b${name}=(\\d+)`).exec(text)?.[1] ?? 0)
        return {
          connections: field("total_connections_received"),
          subscribed: stat("subscribe", "calls") + stat("ssubscribe", "calls"),
          refused: stat("subscribe", "rejected_calls") + stat("ssubscribe", "rejected_calls")
        }
      })
    ),
    (list) => ({
      connections: list.reduce((sum, counters) => sum + counters.connections, 0),
      subscribed: list.reduce((sum, counters) => sum + counters.subscribed, 0),
      refused: list.reduce((sum, counters) => sum + counters.refused, 0)
    })
  )

const subscribeRevokedMillis = 2000

/**
 * A client that retries a refused subscription or reconnects in a loop shows thousands a second;
 * one that retries once per wait shows a few per waiting fiber and poll (at most `min(1 s, lease / 5)`
 * apart, and never less than 300 ms with the matrix's lease). Per worker and second:
 */
const loopBoundPerWorkerSecond = 25

export const waitingScenarios: ReadonlyArray<Scenario> = [
  {
    id: "waiters-killed",
    fault:
      "SIGKILL 2 of 3 workers waiting for a key (registered in its waiter queue) shortly before its holder releases",
    deployments: ["standalone", "ioredis", "sentinel", "ioredis-sentinel", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    workers: 4,
    // Well under a registration lifetime (how long a dead registration stands in line if nothing passes
    // it over): half of one still admits the claim window a woken waiter has (half a second,
    // docs/semantics.md) when the lock cannot tell a dead waiter from a slow one.
    idleBoundMillis: (leaseMillis) => registrationLifetimeMillis(leaseMillis) / 2,
    why:
      "a dead waiter's registration or grant cannot let anyone in, and the live waiter behind it must get the free key " +
      "promptly: the idle figure (a free key with live waiters) stays under half a registration lifetime",
    inject: (context) =>
      Effect.gen(function* () {
        yield* killWaiters(context)
        // Long enough for every dead registration to lapse: any cost of them shows in the run.
        yield* Effect.sleep(registrationLifetimeMillis(context.leaseMillis) + 1000)
      })
  },
  {
    id: "handoff-holder-killed",
    fault:
      "SIGKILL a worker right after its body entered through an in-process hand-off, then another right after a hand-off from another process",
    deployments: ["standalone", "ioredis"],
    expect: "exclusion",
    workers: 3,
    why:
      "a transfer or a release's grant sets the key for the new holder before its body runs, so the key is held " +
      "by the dead process until its lease (or a grant's unclaimed window) runs out; the others take it within about a lease",
    inject: (context) =>
      Effect.gen(function* () {
        yield* killAfterHandOff(context, true)
        yield* killAfterHandOff(context, false)
      })
  },
  {
    id: "subscribe-revoked",
    fault: `the workers' ACL user loses SUBSCRIBE/SSUBSCRIBE and its subscriber connections are killed, for ${subscribeRevokedMillis / 1000} s`,
    deployments: ["standalone", "ioredis", "cluster", "ioredis-cluster"],
    expect: "exclusion",
    expectedErrorCodes: ["NOPERM"],
    deploymentOptions: { aclUser: true },
    why:
      "wake-ups are a shortcut, never a condition: without a subscription waiters poll, so exclusion holds and calls " +
      "only wait longer; a call that needs a new subscription may fail with NOPERM, and no client retries in a loop",
    inject: (context) =>
      Effect.gen(function* () {
        const nodes = context.deployment.nodes
        const before = yield* loopCounters(nodes)
        const from = Date.now()
        yield* setWorkersAcl(context, "-subscribe", "-ssubscribe")
        const after = yield* Effect.gen(function* () {
          // Subscriptions in place survive a permission change: their connections must come back to need it.
          yield* Effect.forEach(nodes, (node) => node.command("CLIENT", "KILL", "TYPE", "pubsub"), { discard: true })
          yield* Effect.sleep(subscribeRevokedMillis)
          return yield* loopCounters(nodes)
        }).pipe(Effect.ensuring(Effect.ignore(setWorkersAcl(context, "+subscribe", "+ssubscribe"))))
        const seconds = (Date.now() - from) / 1000
        // Each admin command above opened a connection of its own on every node: ACL SETUSER, CLIENT KILL, INFO.
        const connections = after.connections - before.connections - 3 * nodes.length
        const refused = after.refused - before.refused
        const subscribed = after.subscribed - before.subscribed
        yield* context.note(
          `while revoked (${seconds.toFixed(1)} s): ${refused} subscriptions refused, ${subscribed} made, ` +
            `${connections} new connections`
        )
        const bound = loopBoundPerWorkerSecond * (yield* context.workers).length * seconds
        if (refused + subscribed > bound || connections > bound) {
          yield* context.fail(
            `retrying in a loop while SUBSCRIBE was refused: ${refused + subscribed} subscription attempts and ` +
              `${connections} new connections in ${seconds.toFixed(1)} s (bound ${Math.round(bound)})`
          )
        }
      })
  }
]
