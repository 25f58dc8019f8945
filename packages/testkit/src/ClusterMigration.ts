/**
 * Moving one hash slot between masters of a `ClusterTopology`, in the same steps `redis-cli
 * --cluster reshard` takes, so a test can stop between them and observe what clients see:
 *
 * 1. `beginMigration` (`setSlotImporting` on the target, then `setSlotMigrating` on the source):
 *    the source still serves existing keys, answers `ASK <slot> <target>` for missing ones, and
 *    `TRYAGAIN` for a multi-key command whose keys are partly present.
 * 2. `migrateKeys` (`MIGRATE ... KEYS`): moved keys are answered with ASK by the source.
 * 3. `setSlotNode` (`CLUSTER SETSLOT <slot> NODE <target>` on the target, the source and every other
 *    master): the slot belongs to the target, and the source answers `MOVED`.
 *
 * `finishMigration` is steps 2 and 3; `migrateSlot` all three. Every helper takes `slot, from, to`
 * in that order.
 */
import * as Effect from "effect/Effect"
import { nodeId, slots, type ClusterTopology } from "./ClusterTopology.ts"
import * as Cluster from "./internal/cluster.ts"
import { done, isLive, logTails, pending, waitUntil } from "./internal/poll.ts"
import type { RedisServer } from "./RedisServer.ts"
import { TestkitError } from "./TestkitError.ts"

/** `CLUSTER SETSLOT <slot> IMPORTING <from id>` on `to`. */
export const setSlotImporting = (slot: number, from: RedisServer, to: RedisServer): Effect.Effect<void, TestkitError> =>
  Effect.flatMap(nodeId(from), (id) => Effect.asVoid(to.command("CLUSTER", "SETSLOT", String(slot), "IMPORTING", id)))

/** `CLUSTER SETSLOT <slot> MIGRATING <to id>` on `from`. */
export const setSlotMigrating = (slot: number, from: RedisServer, to: RedisServer): Effect.Effect<void, TestkitError> =>
  Effect.flatMap(nodeId(to), (id) => Effect.asVoid(from.command("CLUSTER", "SETSLOT", String(slot), "MIGRATING", id)))

/** Marks the slot importing on `to`, then migrating on `from` (that order, as the docs require). */
export const beginMigration = (slot: number, from: RedisServer, to: RedisServer): Effect.Effect<void, TestkitError> =>
  Effect.andThen(setSlotImporting(slot, from, to), setSlotMigrating(slot, from, to))

/** Options of `migrateKeys`. */
export interface MigrateKeysOptions {
  /** Move only these keys (they must hash to `slot`); default: every key of the slot on `from`. */
  readonly keys?: ReadonlyArray<string> | undefined
  /** MIGRATE's own timeout in ms; default 5000. */
  readonly timeoutMs?: number | undefined
}

/**
 * `MIGRATE <to> "" 0 <timeout> KEYS ...` from `from`: the given keys, or batches of
 * `CLUSTER GETKEYSINSLOT` until the slot is empty there. Returns how many keys were sent (keys that
 * no longer exist are not counted).
 */
export const migrateKeys = (
  slot: number,
  from: RedisServer,
  to: RedisServer,
  options?: MigrateKeysOptions
): Effect.Effect<number, TestkitError> =>
  Effect.gen(function* () {
    const timeout = String(options?.timeoutMs ?? 5000)
    const send = (keys: ReadonlyArray<string>): Effect.Effect<void, TestkitError> =>
      keys.length === 0
        ? Effect.void
        : Effect.asVoid(from.command("MIGRATE", to.host, String(to.port), "", "0", timeout, "KEYS", ...keys))
    if (options?.keys !== undefined) {
      const wrong = options.keys.find((key) => Cluster.keySlot(key) !== slot)
      if (wrong !== undefined) {
        return yield* new TestkitError({ reason: "CommandFailed", message: `${wrong} is not in slot ${slot}` })
      }
      const present = yield* Effect.filter(options.keys, (key) =>
        Effect.map(from.command("EXISTS", key), (n) => Number(n) === 1)
      )
      yield* send(present)
      return present.length
    }
    let moved = 0
    while (true) {
      const batch = yield* from.command("CLUSTER", "GETKEYSINSLOT", String(slot), "100")
      const keys = Array.isArray(batch) ? batch.map(String) : []
      if (keys.length === 0) return moved
      yield* send(keys)
      moved += keys.length
    }
  })

/**
 * `CLUSTER SETSLOT <slot> NODE <to id>` on `to`, then `from`, then every other live master, and waits
 * until every live node's `CLUSTER SLOTS` shows `to` as the slot's owner.
 */
export const setSlotNode = (
  topology: ClusterTopology,
  slot: number,
  from: RedisServer,
  to: RedisServer,
  options?: { readonly timeoutMs?: number | undefined }
): Effect.Effect<void, TestkitError> =>
  Effect.gen(function* () {
    const id = yield* nodeId(to)
    const setNode = (node: RedisServer): Effect.Effect<void, TestkitError> =>
      Effect.asVoid(node.command("CLUSTER", "SETSLOT", String(slot), "NODE", id))
    yield* setNode(to)
    yield* setNode(from)
    const masters = Cluster.parseNodes(String(yield* to.command("CLUSTER", "NODES")))
      .filter((line) => line.flags.includes("master") && !line.flags.includes("fail"))
      .map((line) => line.port)
    const others = topology.nodes.filter(
      (node) => isLive(node) && masters.includes(node.port) && node.port !== to.port && node.port !== from.port
    )
    yield* Effect.forEach(others, setNode, { concurrency: "unbounded", discard: true })
    yield* waitUntil(
      Effect.gen(function* () {
        for (const node of topology.nodes.filter(isLive)) {
          const range = (yield* slots(node)).find((r) => r.start <= slot && slot <= r.end)
          if (range?.master.port !== to.port) return pending(`${node.port} sees slot ${slot} at ${range?.master.port}`)
        }
        return done(undefined)
      }),
      {
        what: `every node seeing slot ${slot} owned by ${to.port}`,
        timeoutMs: options?.timeoutMs ?? 10_000,
        diagnostics: logTails(topology.nodes, 8)
      }
    )
  })

/** `migrateKeys` (all remaining keys) then `setSlotNode`: completes a `beginMigration`. */
export const finishMigration = (
  topology: ClusterTopology,
  slot: number,
  from: RedisServer,
  to: RedisServer
): Effect.Effect<void, TestkitError> =>
  Effect.andThen(migrateKeys(slot, from, to), setSlotNode(topology, slot, from, to))

/** Moves a slot with its keys from `from` to `to` in one go (`beginMigration` + `finishMigration`). */
export const migrateSlot = (
  topology: ClusterTopology,
  slot: number,
  from: RedisServer,
  to: RedisServer
): Effect.Effect<void, TestkitError> =>
  Effect.andThen(beginMigration(slot, from, to), finishMigration(topology, slot, from, to))
