// The lock's own clients to the sentinels, and the questions it asks each of them: every sentinel
// has its own small client, every question carries its own timeout, and closing destroys the
// clients without waiting for anyone. Sentinels the others report are asked too.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { LockRedisError } from "@sage/lock/LockError"
import * as Address from "../../connection/address.ts"
import { type Classify, isUnknownMasterReply } from "../../connection/failures.ts"
import { sendWithin } from "../../connection/sending.ts"
import type { Links, SentinelLink } from "./links.ts"

export type Client = SentinelLink

/** The master and its healthy replicas, as the best-informed sentinel reports them. */
export interface View {
  readonly master: Address.HostPort | undefined
  readonly replicas: number
  /** Every replica the sentinel lists for the master, healthy or not (see `Route.knownReplicas`). */
  readonly knownReplicas: number
  /** The healthy replicas' addresses (`ip:port`, as the master lists them in `ROLE`). */
  readonly replicaAddresses: ReadonlyArray<string>
  readonly epoch: number
  /** The other sentinels this one knows, so the client also asks sentinels it was not given. */
  readonly sentinels: ReadonlyArray<Address.HostPort>
}

/** One sentinel's answer: its view, "unknown" (it monitors no master of that name), or no answer. */
export type Answer = View | "unknown" | LockRedisError

const askTimeoutMillis = 1_000
/** Discovery never grows the set of sentinel clients past this. */
const maxSentinels = 16

/** A field map as a record: RESP2 `[k1, v1, k2, v2, ...]`, or RESP3's map (an object or a `Map`). */
const pairs = (reply: unknown): Record<string, string> => {
  const fields: Record<string, string> = {}
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1])
  } else if (reply instanceof Map) {
    for (const [key, value] of reply) fields[String(key)] = String(value)
  } else if (typeof reply === "object" && reply !== null) {
    for (const [key, value] of Object.entries(reply)) fields[key] = String(value)
  }
  return fields
}

/** A node a sentinel can vouch for: not subjectively down, connected, not mid-failover. */
const healthy = (fields: Record<string, string>): boolean => {
  const flags = (fields["flags"] ?? "").split(",")
  return !flags.some((flag) => flag === "s_down" || flag === "o_down" || flag === "disconnected")
}

/** The clients to the sentinels: those given first, then those the answers report. */
export interface SentinelClients {
  /** Grows as sentinels are discovered. */
  readonly clients: Array<Client>
  /** Adds a client for each sentinel in `nodes` not known yet, up to `maxSentinels` in all. */
  readonly discover: (nodes: ReadonlyArray<Address.HostPort>) => void
}

/** Clients to `sentinels`, connecting in the background; they and those discovered later close with the scope. */
export const sentinelClients = (
  sentinels: ReadonlyArray<Address.HostPort>,
  links: Links
): Effect.Effect<SentinelClients, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clients = yield* Effect.acquireRelease(
      Effect.sync(() => sentinels.map(links.sentinel)),
      (clients) => Effect.sync(() => clients.forEach(links.destroy))
    )
    const known = new Set(sentinels.map(Address.format))
    const discover = (nodes: ReadonlyArray<Address.HostPort>): void => {
      for (const node of nodes) {
        if (known.has(Address.format(node)) || clients.length >= maxSentinels) continue
        known.add(Address.format(node))
        clients.push(links.sentinel(node))
      }
    }
    return { clients, discover }
  })

// One question, bounded by its own timer (`sendWithin`), with neither node-redis's `timeout` nor an
// abort signal: on node-redis 5 a command given both can be unlinked from the queue twice (the
// timeout after an abort), which throws from a timer callback, an uncaught exception, before 5.9,
// and corrupts the queue's length after. A question abandoned by an interruption is answered and
// ignored.
const send = (
  client: Client,
  args: ReadonlyArray<string>,
  classify: Classify
): Effect.Effect<unknown, LockRedisError> =>
  sendWithin(client, [...args], askTimeoutMillis, classify).pipe(
    Effect.mapError((error) => new LockRedisError({ ...error, command: args.slice(0, 2).join(" ") }))
  )

/** One sentinel's view of the master `name` and its healthy replicas. */
export const ask = (client: Client, name: string, classify: Classify): Effect.Effect<Answer> =>
  Effect.gen(function* () {
    const master = pairs(yield* send(client, ["SENTINEL", "MASTER", name], classify))
    const port = Number(master["port"])
    const epoch = Number(master["config-epoch"] ?? 0)
    const address = { host: master["ip"] ?? "", port }
    const usable = healthy(master) && !(master["flags"] ?? "").includes("failover_in_progress")
    const replies = yield* send(client, ["SENTINEL", "REPLICAS", name], classify)
    const listed = Array.isArray(replies) ? replies.map(pairs) : []
    const replicaAddresses = listed.filter(healthy).map((fields) => `${fields["ip"] ?? ""}:${fields["port"] ?? ""}`)
    const replicas = replicaAddresses.length
    const valid = usable && Address.checkHost(address.host) === undefined && Address.checkPort(port) === undefined
    const others = yield* send(client, ["SENTINEL", "SENTINELS", name], classify).pipe(Effect.orElseSucceed(() => []))
    return {
      master: valid ? address : undefined,
      replicas,
      knownReplicas: listed.length,
      replicaAddresses,
      epoch,
      sentinels: nodesOf(others)
    } satisfies View
  }).pipe(
    Effect.catch((error: LockRedisError) =>
      Effect.succeed<Answer>(error.kind === "server" && isUnknownMasterReply(error.reply) ? "unknown" : error)
    )
  )

/** The healthy, well-formed addresses in a `SENTINEL SENTINELS` or `SENTINEL REPLICAS` reply. */
const nodesOf = (reply: unknown): Array<Address.HostPort> =>
  (Array.isArray(reply) ? reply.map(pairs) : []).filter(healthy).flatMap((fields) => {
    const node = { host: fields["ip"] ?? "", port: Number(fields["port"]) }
    return Address.checkHost(node.host) === undefined && Address.checkPort(node.port) === undefined ? [node] : []
  })
