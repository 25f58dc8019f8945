// The batches of group commit: the members waiting for a master's next batch, sending them as one
// write (their scripts, one `ROLE`, one `WAIT`) on one dedicated connection, and handing each member
// its outcome and the connection, which goes back to the pool once the last member is done with it.
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import { LockRedisError } from "@sage/lock/LockError"
import type { Connection } from "../../pool/connection.ts"
import type { Pool } from "../../pool/pool.ts"
import { sharingWaits } from "./sharedWaits.ts"

/** The replies a member gets from its batch: its script's, and the batch's `ROLE` and `WAIT` (if any). */
export interface BatchOutcome {
  readonly script: Result.Result<unknown, LockRedisError>
  readonly role: Result.Result<unknown, LockRedisError>
  /** The batch's `WAIT` reply, or a failure when the batch sent none. */
  readonly acks: Result.Result<unknown, LockRedisError>
}

/** Batches in flight per node before new arrivals wait for the next one. */
export const inFlight = 4

/** The most members one batch takes; more wait for the next. */
const maxBatch = 64

export const noWait: Result.Result<unknown, LockRedisError> = Result.fail(
  new LockRedisError({
    command: "WAIT",
    kind: "server",
    code: "NOT_SENT",
    reply: "the batch sent no WAIT",
    retryable: true,
    mayHaveExecuted: false
  })
)

export const roleCommand: ReadonlyArray<string> = ["ROLE"]

export type Delivery = Result.Result<readonly [BatchOutcome, Batch], LockRedisError>

export interface Member {
  readonly script: ReadonlyArray<string>
  readonly wait: ReadonlyArray<string> | undefined
  /** Until when (monotonic ms) the member waits for its batch's reply. */
  readonly deadline: number
  /** Set once, when its batch answers or fails; `undefined` while it waits or after it left. */
  delivered: Delivery | undefined
  /** Resumes the waiting fiber, once it waits. */
  resume: ((delivery: Delivery) => void) | undefined
  /** Set when it left (interrupted, or out of time): a batch not sent yet skips it, a sent one ignores it. */
  left: boolean
  /** Set when its batch went out. */
  sent: boolean
}

/** A batch's connection, shared by its members until the last one is done with it. */
export interface Batch {
  readonly connection: Connection
  /** Members still working on the connection. */
  users: number
  /** Set when a member failed or was interrupted there: the connection is closed, not reused. */
  tainted: boolean
  readonly done: () => void
}

export interface Node {
  readonly pending: Array<Member>
  running: number
}

/** What group commit keeps for a backend: its pool, its scope (batches run in it) and each master's queue. */
export interface Batches {
  readonly pool: Pool
  readonly scope: Scope.Scope
  readonly nodes: Map<string, Node>
}

const closed = (address: string): LockRedisError =>
  new LockRedisError({
    command: "EVALSHA",
    kind: "connection",
    code: "CLOSED",
    reply: `the batch to ${address} ended without a reply (the lock backend is closing)`,
    retryable: false,
    mayHaveExecuted: true
  })

const deliver = (member: Member, delivery: Delivery): boolean => {
  if (member.left || member.delivered !== undefined) return false
  member.delivered = delivery
  member.resume?.(delivery)
  return true
}

/** The batch's own failure when a member left its connection unusable (never seen by members). */
const tainted = new LockRedisError({
  command: "batch",
  kind: "connection",
  code: "TAINTED",
  reply: "a member of the batch failed on its connection",
  retryable: true,
  mayHaveExecuted: true
})

export const nodeOf = (batches: Batches, address: string): Node => {
  let node = batches.nodes.get(address)
  if (node === undefined) {
    node = { pending: [], running: 0 }
    batches.nodes.set(address, node)
  }
  return node
}

/** A place among the `inFlight` batches of a node. */
export interface Slot {
  readonly take: () => void
  /** Gives the place back (once, and only if taken), starting the next batch if members wait. */
  readonly end: Effect.Effect<void>
}

/**
 * A batch's place among the `inFlight` of its node: taken when it starts, given back once, when
 * its round trip ends (or it failed), and then the next batch may go if members came meanwhile.
 * Given back only if taken, so an interruption at any point leaves the count right.
 */
export const slot = (batches: Batches, address: string, node: Node): Slot => {
  let state: "free" | "taken" | "ended" = "free"
  return {
    take: () => {
      node.running++
      state = "taken"
    },
    end: Effect.suspend(() => {
      if (state !== "taken") return Effect.void
      state = "ended"
      node.running--
      return node.pending.length > 0 && node.running < inFlight
        ? Effect.asVoid(Effect.forkIn(startBatch(batches, address, node), batches.scope))
        : Effect.void
    })
  }
}

/**
 * Sends what is pending (members that left are skipped) as one batch, and when its round trip
 * ends, starts the next one if members came meanwhile.
 */
export const startBatch = (batches: Batches, address: string, node: Node): Effect.Effect<void> => {
  const place = slot(batches, address, node)
  const next = place.end
  const batch = Effect.suspend(() => {
    // Past members that left: a full batch's worth of them must not strand the ones behind.
    let members: Array<Member> = []
    while (members.length === 0 && node.pending.length > 0) {
      members = node.pending.splice(0, maxBatch).filter((member) => !member.left)
    }
    if (members.length === 0) return Effect.void
    place.take()
    // Bounded by the member with the most time left: one with less gives up on its own timer
    // (and leaves the batch, if it has not gone out yet), not the others with it.
    const deadline = Math.max(...members.map((member) => member.deadline))
    const timeout = Math.max(1, deadline - performance.now())
    return batches.pool
      .use(address, timeout, (connection) => send(members, deadline, next, connection))
      .pipe(
        Effect.onExit((exit) =>
          Effect.andThen(
            Effect.sync(() => {
              // No connection, or the backend closed: every member that still waits hears why.
              const failure = exit._tag === "Failure" ? Cause.findErrorOption(exit.cause) : undefined
              const error = failure?._tag === "Some" && failure.value !== tainted ? failure.value : closed(address)
              for (const member of members) deliver(member, Result.fail(error))
            }),
            next
          )
        ),
        Effect.ignore
      )
  })
  return Effect.ensuring(batch, next)
}

/**
 * Sends a batch on the connection it holds, `next` once its round trip ended, and hands each member
 * its outcome. Run once the connection is held: members that left while it was awaited are not sent.
 */
const send = (
  members: ReadonlyArray<Member>,
  deadline: number,
  next: Effect.Effect<void>,
  connection: Connection
): Effect.Effect<void, LockRedisError> => {
  const live = members.filter((member) => !member.left)
  if (live.length === 0) return Effect.void
  // One WAIT for the batch: for the most replicas a member wants, within the least time a member has.
  let wanted = 0
  let millis = Infinity
  for (const { wait } of live) {
    if (wait === undefined) continue
    wanted = Math.max(wanted, Number(wait[1]))
    millis = Math.min(millis, Number(wait[2]))
  }
  for (const member of live) member.sent = true
  const commands = live.map((member) => member.script)
  commands.push(roleCommand)
  if (wanted > 0) commands.push(["WAIT", String(wanted), String(Math.max(1, Math.floor(millis)))])
  return Effect.flatMap(
    Effect.tap(connection.sendAll(commands, Math.max(1, deadline - performance.now())), next),
    (outcomes) =>
      Effect.callback<void, LockRedisError>((resume) => {
        const role = outcomes[live.length]!
        const acks = wanted > 0 ? outcomes[live.length + 1]! : noWait
        const batch: Batch = {
          connection: sharingWaits(connection),
          users: 1,
          tainted: false,
          done: () => {
            if (--batch.users === 0) resume(batch.tainted ? Effect.fail(tainted) : Effect.void)
          }
        }
        for (const [i, member] of live.entries()) {
          batch.users++
          if (!deliver(member, Result.succeed([{ script: outcomes[i]!, role, acks }, batch]))) batch.users--
        }
        batch.done()
      })
  )
}
