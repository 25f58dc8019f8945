/**
 * Bounded polling for the topology modules: a probe runs every `intervalMs` until it reports done or
 * the deadline passes. A probe that fails (a node still starting, a command timing out) counts as
 * "not yet", so transient errors never end a wait early; the last observation ends up in the timeout
 * error together with whatever diagnostics (log tails) the caller adds.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { RedisServer } from "../RedisServer.ts"
import { TestkitError } from "../TestkitError.ts"

/** What one probe saw: done with a value, or pending with a description of the current state. */
export type Progress<A> =
  { readonly _tag: "Done"; readonly value: A } | { readonly _tag: "Pending"; readonly detail: string }

/** A finished probe. */
export const done = <A>(value: A): Progress<A> => ({ _tag: "Done", value })

/** An unfinished probe, with what it saw. */
export const pending = (detail: string): Progress<never> => ({ _tag: "Pending", detail })

/** How `waitUntil` polls and reports. */
export interface WaitOptions {
  /** What is awaited, for the error message ("replicas in sync"). */
  readonly what: string
  readonly timeoutMs: number
  /** Default 50 ms. */
  readonly intervalMs?: number | undefined
  /** Extra text for the timeout error, e.g. the nodes' log tails. */
  readonly diagnostics?: Effect.Effect<string> | undefined
}

/** Runs `probe` until it is done; fails with a `Timeout` TestkitError naming the last state otherwise. */
export const waitUntil = <A>(
  probe: Effect.Effect<Progress<A>, TestkitError>,
  options: WaitOptions
): Effect.Effect<A, TestkitError> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    let last = "not checked yet"
    while (true) {
      const outcome = yield* Effect.result(probe)
      if (outcome._tag === "Success") {
        if (outcome.success._tag === "Done") return outcome.success.value
        last = outcome.success.detail
      } else {
        last = outcome.failure.message
      }
      const elapsed = (yield* Clock.currentTimeMillis) - started
      if (elapsed >= options.timeoutMs) {
        const extra = options.diagnostics === undefined ? "" : `\n${yield* options.diagnostics}`
        return yield* new TestkitError({
          reason: "Timeout",
          message: `${options.what}: not reached within ${options.timeoutMs} ms (last: ${last})${extra}`
        })
      }
      yield* Effect.sleep(Math.min(options.intervalMs ?? 50, Math.max(1, options.timeoutMs - elapsed)))
    }
  })

/** Parses `INFO` text into its `field:value` pairs (section headers and blank lines dropped). */
export const parseInfo = (text: string): Record<string, string> => {
  const fields: Record<string, string> = {}
  for (const line of text.split("\n")) {
    const trimmed = line.trim()
    const colon = trimmed.indexOf(":")
    if (colon > 0 && !trimmed.startsWith("#")) fields[trimmed.slice(0, colon)] = trimmed.slice(colon + 1)
  }
  return fields
}

/** Parses a flat `[field, value, field, value, ...]` reply (SENTINEL MASTER, CLUSTER SHARDS entries). */
export const parsePairs = (reply: unknown): Record<string, string> => {
  const fields: Record<string, string> = {}
  if (!Array.isArray(reply)) return fields
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1])
  return fields
}

/** Whether a server can answer now: running and not stopped by `pause`. */
export const isLive = (server: RedisServer): boolean => server.running && !server.paused

/** The labelled log tails of several servers, for error messages. */
export const logTails = (servers: ReadonlyArray<RedisServer>, lines = 12): Effect.Effect<string> =>
  Effect.map(
    Effect.forEach(servers, (server) =>
      Effect.map(server.logTail(lines), (tail) => `=== ${server.flavor} 127.0.0.1:${server.port}\n${tail}`)
    ),
    (tails) => tails.join("\n")
  )
