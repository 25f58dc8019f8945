// The server the demo runs against: REDIS_URL when given, otherwise a throwaway redis-server or
// valkey-server started by the test kit on a free port in a temp dir and killed when the scope closes.
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { RedisServer, ServerBinary, type TestkitError } from "@sage/lock-testkit"
import type { DemoOptions } from "./options.ts"

export interface Target {
  readonly url: string
  /** For display: what the server is, without credentials. */
  readonly label: string
  /** Whether the server outlives the demo (so the demo cleans up its keys). */
  readonly external: boolean
}

const redact = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return "(unparsable REDIS_URL)"
  }
}

export const acquire = (options: DemoOptions): Effect.Effect<Target, TestkitError.TestkitError, Scope.Scope> => {
  if (options.redisUrl !== undefined) {
    return Effect.succeed({ url: options.redisUrl, label: `REDIS_URL ${redact(options.redisUrl)}`, external: true })
  }
  return Effect.gen(function* () {
    const bin = yield* ServerBinary.resolve(options.flavor)
    const server = yield* RedisServer.start({ flavor: options.flavor })
    const version = yield* server.command("INFO", "server").pipe(
      // Valkey reports redis_version too (the compatibility level), so look for its own first.
      Effect.map(
        (reply) => /valkey_version:(\S+)/.exec(String(reply))?.[1] ?? /redis_version:(\S+)/.exec(String(reply))?.[1]
      ),

      Effect.orElseSucceed(() => undefined)
    )
    return {
      url: server.url,
      label: `${bin}${version === undefined ? "" : ` ${version}`} (pid ${server.pid}) on ${server.url}, temp dir ${server.dir}`,
      external: false
    }
  })
}
