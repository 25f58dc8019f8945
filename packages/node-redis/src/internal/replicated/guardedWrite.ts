// One lock script on a replicated deployment, guarded: run on the key's master, then, when it wrote,
// the role and the client's view checked and the replicas waited for, following `MOVED` and `ASK`
// within the caller's budget. Every replicated operation (acquire, renew, release, check, leave)
// runs through here; the backend (backend.ts) only says what each script's reply means.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { LeaseRequest } from "@sage/lock/LockBackend"
import { LockRedisError } from "@sage/lock/LockError"
import type { Send } from "../connection/sending.ts"
import type { Connection } from "../pool/connection.ts"
import type { Pool } from "../pool/pool.ts"
import * as Scripts from "../scripts.ts"
import { awaitReplicas, connectedReplicas, earlyWait } from "./acknowledgement.ts"
import type { Known } from "./known.ts"
import { suggestsStaleView } from "./staleView.ts"
import type { Route, Topology } from "./topology.ts"

/** Whether a script's reply left our token with a fresh lease on the key (`wrote`), or nothing. */
export type Outcome = "wrote" | "no-write"

/** A failure after the write was applied: the key may now hold our token, so cleanup must release it. */
const afterWrite = (error: LockRedisError): LockRedisError =>
  error.mayHaveExecuted ? error : new LockRedisError({ ...error, cause: error.cause, mayHaveExecuted: true })

const askTarget = (error: LockRedisError): string | undefined =>
  error.code === "ASK" ? error.reply.split(" ")[2] : undefined

const noRole: Result.Result<unknown, LockRedisError> = Result.fail(undefined as unknown as LockRedisError)

/**
 * One call of `guardedWrite`: what its steps read, built once per call. The steps below are plain
 * functions over it rather than closures made for each call.
 */
interface Write<A> {
  readonly topology: Topology
  readonly pool: Pool
  readonly known: Known
  readonly request: LeaseRequest
  readonly script: Scripts.Script
  readonly keys: ReadonlyArray<string>
  readonly args: ReadonlyArray<string>
  readonly interpret: (reply: unknown) => Result.Result<readonly [A, Outcome], LockRedisError>
  readonly onNotMaster: (address: string) => Effect.Effect<A, LockRedisError>
  /** The fiber's clock, read directly: the budget costs no Effect step. */
  readonly clock: Clock.Clock
  /** When the call started (monotonic ms). */
  readonly start: number
  /**
   * The part of the caller's time limit the steps may use: they finish a little before the
   * caller's own cut-off, so a pool wait or a WAIT that runs out ends with its own explanation
   * (POOL_EXHAUSTED, UNACKNOWLEDGED) rather than a bare timeout.
   */
  readonly budget: number
  /**
   * Acquire and renew can write a lease that needs the role check, and a check's "held" is only
   * worth something from the master; release and leave need none.
   */
  readonly writesLease: boolean
  /** Whether the script needs a dedicated connection (see `onNode`). */
  readonly dedicated: boolean
}

const nowMillis = (clock: Clock.Clock): number => Number(clock.monotonicTimeNanosUnsafe() / 1_000_000n)

/** What is left of the call's budget. */
const left = <A>(write: Write<A>): number => write.budget - (nowMillis(write.clock) - write.start)

/**
 * Runs one script on the key's master and, when it wrote, checks the role and waits for replicas.
 * `interpret` says what the reply means, and whether the key now holds our token with a fresh lease
 * (`wrote`).
 *
 * Every replicated operation runs through here, so the usual case (a free pooled connection, one
 * round trip, the role and the replicas as expected) takes a handful of Effect steps: the budget is
 * read from the fiber's clock directly, replies are interpreted as plain values, and an Effect is
 * built only where the outcome needs one (a second `WAIT`, a `ROLE` asked again, a failure).
 */
export const guardedWrite = <A>(
  topology: Topology,
  pool: Pool,
  known: Known,
  request: LeaseRequest,
  script: Scripts.Script,
  [keys, args]: readonly [ReadonlyArray<string>, ReadonlyArray<string>],
  interpret: (reply: unknown) => Result.Result<readonly [A, Outcome], LockRedisError>,
  onNotMaster: (address: string) => Effect.Effect<A, LockRedisError>
): Effect.Effect<A, LockRedisError> =>
  Effect.withFiber((fiber) => {
    const clock = fiber.getRef(Clock.Clock)
    const writesLease = Scripts.touchesLease(script)
    const write: Write<A> = {
      topology,
      pool,
      known,
      request,
      script,
      keys,
      args,
      interpret,
      onNotMaster,
      clock,
      start: nowMillis(clock),
      budget: request.timeoutMillis - Math.max(10, request.timeoutMillis * 0.2),
      writesLease,
      dedicated: writesLease && request.acknowledge
    }
    const routed = topology.route(request.key)
    if (Result.isFailure(routed)) return Effect.fail(routed.failure)
    const route = routed.success
    return Effect.catch(attempt(write, route, route.address, false), (error) => {
      const target = askTarget(error)
      if (target === undefined) return followMoved(write, route, error)
      // The script runs on the node the slot is migrating to: its replicas acknowledge the write.
      const asked: Route = topology.routeAt?.(target) ?? { address: target, replicas: undefined }
      return Effect.catch(attempt(write, asked, target, true), (error) => refreshOn(write, error))
    })
  })

/** One try of the script on `address` (the route's master, or the node an `ASK` names). */
const attempt = <A>(
  write: Write<A>,
  route: Route,
  address: string,
  asking: boolean
): Effect.Effect<A, LockRedisError> => {
  const { known, script } = write
  // An acknowledged acquisition joins the node's next batch (groupCommit/): its script, one
  // ROLE and one WAIT for the whole batch, in one write on one dedicated connection.
  if (write.dedicated && !asking && Scripts.isAcquire(script) && known.groups !== undefined) {
    const timeout = left(write)
    return known.groups.run(
      address,
      timeout,
      Scripts.evalArgs("EVALSHA", script, write.keys, write.args),
      earlyWaitFor(write, route, address, timeout),
      (outcome, connection) => afterScript(write, route, connection, false, outcome.script, outcome.role, outcome.acks)
    )
  }
  return onNode(write, address, asking, (connection) =>
    asking
      ? Effect.flatMap(
          Effect.suspend(() => connection.send(["ASKING"], left(write))),
          () => sendTogether(write, route, address, asking, connection)
        )
      : sendTogether(write, route, address, asking, connection)
  )
}

/**
 * Runs `f` on a connection to `address`. An ASK redirect takes a second connection within what is
 * left, not a fresh budget. Only `WAIT` (it counts the writes of its connection and blocks it) and
 * `ASKING` (it must come right before the script) need a connection of their own. Everything else
 * runs on one of the node's shared, pipelined connections (the key picks which), `ROLE` included:
 * whatever other callers send in between, it answers for the node that ran the script, after the
 * script ran.
 */
const onNode = <A>(
  write: Write<A>,
  address: string,
  asking: boolean,
  f: (connection: Connection) => Effect.Effect<A, LockRedisError>
): Effect.Effect<A, LockRedisError> =>
  write.dedicated || asking
    ? write.pool.use(address, left(write), f)
    : write.pool.shared(address, write.request.key, left(write), f)

/**
 * The script, ROLE and (with acknowledgement) WAIT go out together, one round trip: on one
 * connection they run in order, so ROLE answers for the node that just ran the script and WAIT
 * waits for its write.
 */
const sendTogether = <A>(
  write: Write<A>,
  route: Route,
  address: string,
  asking: boolean,
  connection: Connection
): Effect.Effect<A, LockRedisError> => {
  const { writesLease } = write
  const timeout = left(write)
  const wait = earlyWaitFor(write, route, address, timeout)
  const commands: Array<ReadonlyArray<string>> = [Scripts.evalArgs("EVALSHA", write.script, write.keys, write.args)]
  if (writesLease) commands.push(["ROLE"])
  if (wait !== undefined) commands.push(wait)
  return Effect.flatMap(connection.sendAll(commands, timeout), (outcomes) =>
    afterScript(
      write,
      route,
      connection,
      asking,
      outcomes[0]!,
      writesLease ? outcomes[1]! : noRole,
      wait === undefined ? noRole : outcomes[writesLease ? 2 : 1]!
    )
  )
}

/** The `WAIT` to send with an acquisition's script (see `earlyWait`), or none. */
const earlyWaitFor = <A>(
  write: Write<A>,
  route: Route,
  address: string,
  timeout: number
): ReadonlyArray<string> | undefined =>
  Scripts.isAcquire(write.script) && write.request.acknowledge && !write.known.busy.recent(write.request.key)
    ? earlyWait(route, write.known.replicaCounts.get(address), timeout)
    : undefined

/**
 * The script's outcome, on the connection it ran on: when it wrote, the role and the replicas
 * are checked there (a second `WAIT` must follow the write on its own connection).
 */
const afterScript = <A>(
  write: Write<A>,
  route: Route,
  connection: Connection,
  asking: boolean,
  result: Result.Result<unknown, LockRedisError>,
  role: Result.Result<unknown, LockRedisError>,
  acks: Result.Result<unknown, LockRedisError>
): Effect.Effect<A, LockRedisError> => {
  if (Result.isFailure(result)) {
    // Re-sent (NOSCRIPT): the role and acknowledgement that went with it ran too early. After an
    // ASK redirect the re-sent script needs `ASKING` right before it again (the flag lasts one
    // command), or the importing node answers MOVED back to the source.
    if (result.failure.code !== "NOSCRIPT") return Effect.fail(result.failure)
    const evalArgs = Scripts.evalArgs("EVAL", write.script, write.keys, write.args)
    const resent = asking
      ? Effect.flatMap(
          Effect.suspend(() => connection.sendAll([["ASKING"], evalArgs], left(write))),
          ([asked, evaluated]) =>
            Result.isFailure(asked!) ? Effect.fail(asked.failure) : Effect.fromResult(evaluated!)
        )
      : Effect.suspend(() => connection.send(evalArgs, left(write)))
    return Effect.flatMap(resent, (reply) => afterReply(write, route, connection, asking, reply, undefined, undefined))
  }
  return afterReply(
    write,
    route,
    connection,
    asking,
    result.success,
    Result.isFailure(role) ? undefined : role.success,
    Result.isFailure(acks) ? undefined : acks.success
  )
}

const afterReply = <A>(
  write: Write<A>,
  route: Route,
  connection: Connection,
  asking: boolean,
  reply: unknown,
  role: unknown,
  acks: unknown
): Effect.Effect<A, LockRedisError> => {
  const interpreted = write.interpret(reply)
  if (Result.isFailure(interpreted)) return Effect.fail(interpreted.failure)
  const [value, outcome] = interpreted.success
  if (outcome === "no-write") {
    if (Scripts.isAcquire(write.script)) write.known.busy.note(write.request.key)
    return Effect.succeed(value)
  }
  return checkWrite(write, route, connection, value, asking, role ?? undefined, acks ?? undefined)
}

/**
 * Everything after an applied write: the role, the client's view, the replicas. A failure here
 * comes after the write was applied, so it says so (`afterWrite`).
 */
const checkWrite = <A>(
  write: Write<A>,
  route: Route,
  connection: { readonly address: string; readonly send: Send },
  value: A,
  asking: boolean,
  roleAfterWrite: unknown,
  earlyAcks: unknown
): Effect.Effect<A, LockRedisError> =>
  roleAfterWrite !== undefined
    ? withRole(write, route, connection, value, asking, roleAfterWrite, earlyAcks)
    : Effect.flatMap(Effect.mapError(connection.send(["ROLE"], left(write)), afterWrite), (role) =>
        withRole(write, route, connection, value, asking, role, earlyAcks)
      )

const withRole = <A>(
  write: Write<A>,
  route: Route,
  connection: { readonly address: string; readonly send: Send },
  value: A,
  asking: boolean,
  role: unknown,
  earlyAcks: unknown
): Effect.Effect<A, LockRedisError> => {
  const { request } = write
  write.known.replicaCounts.set(connection.address, connectedReplicas(role))
  const isMaster = Array.isArray(role) && role[0] === "master"
  if (!isMaster || (!asking && !write.topology.isMaster(request.key, connection.address))) {
    return Effect.mapError(write.onNotMaster(connection.address), afterWrite)
  }
  if (!request.acknowledge) return Effect.succeed(value)
  return Effect.mapError(Effect.as(awaitReplicas(connection, route, role, left(write), earlyAcks), value), afterWrite)
}

const refreshOn = <A>(write: Write<A>, error: LockRedisError): Effect.Effect<never, LockRedisError> =>
  suggestsStaleView(error)
    ? Effect.andThen(write.topology.refresh(write.request.key), Effect.fail(error))
    : Effect.fail(error)

/**
 * A MOVED reply means the script did not run: once the view has caught up, the new master is
 * asked within what is left, rather than a retry round later. The re-read gets half of that, so
 * a slow one still leaves time for the call (or for the caller's retry).
 */
const followMoved = <A>(write: Write<A>, route: Route, error: LockRedisError): Effect.Effect<A, LockRedisError> => {
  const { topology, request } = write
  if (error.code !== "MOVED" || topology.reread === undefined) return refreshOn(write, error)
  return Effect.flatMap(topology.reread(request.key, left(write) / 2), () => {
    const moved = topology.route(request.key)
    if (Result.isFailure(moved) || moved.success.address === route.address) return refreshOn(write, error)
    return Effect.catch(attempt(write, moved.success, moved.success.address, false), (error) => refreshOn(write, error))
  })
}
