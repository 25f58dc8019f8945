// The `Config` layers' values read into the options the other layers take: credentials and the
// pool size, and the comma-separated lists of sentinels (`host:port`) and Cluster nodes (URLs),
// each entry checked before any I/O.
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import type { InvalidArgument } from "@sage/lock/LockError"
import * as Address from "./connection/address.ts"
import type { Connect } from "./connection/connecting.ts"
import { invalid } from "./options/validate.ts"
import { prepareCluster } from "./replicated/cluster/prepare.ts"
import { prepareSentinel } from "./replicated/sentinel/prepare.ts"
import { prepare } from "./standalone/prepare.ts"

/** What every `Config` layer reads (`NodeRedisBackend.ConfigAuth`). */
interface Auth {
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  readonly maxConnections?: number | undefined
}

const auth = (config: Auth) => ({
  ...(config.username === undefined ? {} : { username: config.username }),
  ...(config.password === undefined ? {} : { password: Redacted.value(config.password) })
})

const pool = (config: Auth) =>
  config.maxConnections === undefined ? {} : { dedicatedPool: { maxConnections: config.maxConnections } }

/** The non-empty, trimmed entries of a comma-separated list. */
const commaList = (list: string): Array<string> =>
  list
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)

/** `layerConfig`'s values, checked, and the connect they describe. */
export const standaloneFromConfig = (
  config: Auth & { readonly url: string; readonly connections?: number | undefined }
): Effect.Effect<Connect, InvalidArgument> =>
  prepare({
    url: config.url,
    ...auth(config),
    ...pool(config),
    ...(config.connections === undefined ? {} : { connections: config.connections })
  })

/** `layerSentinelConfig`'s values, checked, and the connect they describe. */
export const sentinelFromConfig = (
  config: Auth & { readonly name: string; readonly sentinels: string }
): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const sentinels: Array<Address.HostPort> = []
    for (const entry of commaList(config.sentinels)) {
      const parsed = Address.parse(entry)
      if (Result.isFailure(parsed)) return yield* invalid("sentinels", config.sentinels, parsed.failure)
      sentinels.push(parsed.success)
    }
    return yield* prepareSentinel({ name: config.name, sentinels, nodeClientOptions: auth(config), ...pool(config) })
  })

/** `layerClusterConfig`'s values, checked, and the connect they describe. */
export const clusterFromConfig = (config: Auth & { readonly nodes: string }): Effect.Effect<Connect, InvalidArgument> =>
  Effect.gen(function* () {
    const urls = commaList(config.nodes)
    for (const url of urls) {
      const problem = Address.checkRedisUrl(url)
      if (problem !== undefined) return yield* invalid("nodes", config.nodes, `"${url}" ${problem}`)
    }
    return yield* prepareCluster({ rootNodes: urls.map((url) => ({ url })), defaults: auth(config), ...pool(config) })
  })
