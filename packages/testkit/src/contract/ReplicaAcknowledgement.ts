// Replica acknowledgement on a Cluster whose shards have two replicas each, for any Cluster backend:
// what the shared contract (one replica per master) cannot show, that `WAIT` asks for every replica
// the backend's view lists, not just one.
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Lock } from "@sage/lock"
import { LockBackend } from "@sage/lock/LockBackend"
import * as ClusterTopology from "../ClusterTopology.ts"
import type * as ServerBinary from "../ServerBinary.ts"

/**
 * Starts a Cluster of `flavor` with two replicas per master and a backend on it (`backendOn`), and
 * checks: with one of a shard's two replicas stalled, an acquisition with acknowledgement fails with
 * `TimedOut` ("unacknowledged") before its body runs; without acknowledgement it goes through.
 */
export const everyReplicaCounts = (
  flavor: ServerBinary.Flavor,
  backendOn: (topology: ClusterTopology.ClusterTopology) => Effect.Effect<LockBackend["Service"], unknown, Scope.Scope>
): Effect.Effect<void, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    // The node timeout is long so the stalled replica stays in the cluster's view.
    const topology = yield* ClusterTopology.start({ flavor, replicasPerMaster: 2, nodeTimeoutMillis: 8_000 })
    const backend = yield* backendOn(topology)
    const clientOn = (options: Lock.LockOptions) =>
      Lock.make({ namespace: "acks", ...options }).pipe(Effect.provideService(LockBackend, backend))
    const lock = yield* clientOn({})
    assert.strictEqual(yield* Effect.succeed("both").pipe(lock.withLock("k", { waitTimeout: "2 seconds" })), "both")
    const shard = yield* topology.shardForSlot(ClusterTopology.keySlot(`${lock.namespace}:{k}`))
    assert.strictEqual(shard.replicas.length, 2)
    const [stalled] = shard.replicas
    yield* stalled!.pause
    yield* Effect.addFinalizer(() => Effect.ignore(stalled!.resume))
    let ran = false
    const error = yield* Effect.sync(() => (ran = true)).pipe(
      lock.withLock("k", { waitTimeout: "800 millis" }),
      Effect.flip
    )
    assert.isFalse(ran, "one acknowledgement of two is not enough")
    assert.strictEqual(error._tag, "TimedOut")
    if (error._tag === "TimedOut") assert.strictEqual(error.reason, "unacknowledged")
    const unacked = yield* clientOn({ replicaAcknowledgement: false })
    assert.strictEqual(yield* Effect.succeed(1).pipe(unacked.withLock("k", { waitTimeout: "2 seconds" })), 1)
  })
