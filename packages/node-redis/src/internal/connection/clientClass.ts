// Making node-redis clients without rebuilding node-redis's client class for each one.
//
// `createClient` builds a class with a method for every command (and, through the `redis` package,
// for its modules' commands) and keeps only the last class it built, for options equal to the
// previous call's, address included. A backend connects to several addresses (its sentinels, the
// master, every Cluster node, the dedicated pool's connections), so nearly every connection it
// opened rebuilt the class: about 25 ms of CPU each on the development machine, during which the
// event loop, and with it the renewal of every lock held, waits. A first burst of locks on a
// three-master Cluster stalled the loop for over half a second. A client's `duplicate` makes a client
// of the same class with other options, so the class is built once for each set of the options it
// is built from (`RESP`, `modules`, `functions`, `scripts`: the user's, the same for all of a
// backend's connections).
import {
  createClient,
  type RedisClientOptions as ClientOptions,
  type RedisFunctions,
  type RedisModules,
  type RedisScripts,
  type RespVersions
} from "redis"
import { destroyForGood } from "./teardown.ts"

type Client = ReturnType<typeof createClient>

/** node-redis options of any protocol version. */
type RedisClientOptions = ClientOptions<RedisModules, RedisFunctions, RedisScripts, RespVersions>

/** The options node-redis builds a client's class from; the rest is each client's own. */
const classOptionNames = ["RESP", "modules", "functions", "scripts"] as const

const classOptionsOf = (options: RedisClientOptions): RedisClientOptions => {
  const picked: Record<string, unknown> = {}
  for (const name of classOptionNames) if (options[name] !== undefined) picked[name] = options[name]
  return picked as RedisClientOptions
}

/**
 * A `createClient` for one backend: the client `createClient(options)` would make, made by
 * `duplicate` from a template client of the right class, which is built again only if the class
 * options change.
 * With `expected`, the options its clients will be made with, the class is built now rather than
 * at the first connection (which may be a lock operation's, its lease already counting).
 */
export const makeClients = (expected?: RedisClientOptions): ((options: RedisClientOptions) => Client) => {
  let template: Client | undefined
  let builtFrom: RedisClientOptions = {}
  const build = (options: RedisClientOptions): Client => {
    const made = createClient(classOptionsOf(options) as ClientOptions) as Client
    builtFrom = options
    // Never connected; node-redis 6 registers every client it makes for its metrics until it is
    // destroyed.
    destroyForGood(made)
    return made
  }
  if (expected !== undefined) template = build(expected)
  return (options) => {
    if (template === undefined || classOptionNames.some((name) => options[name] !== builtFrom[name])) {
      template = build(options)
    }
    return template.duplicate(options) as Client
  }
}
