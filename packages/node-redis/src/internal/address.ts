// Node addresses as `host:port` text, the form node-redis uses to name cluster nodes and the form
// `layerSentinelConfig` reads. A malformed address is refused here with a reason, never guessed at:
// `"10.0.0.5"` has no port, and reading its last `.5` as one would point the client somewhere else.
import * as Result from "effect/Result"

export interface HostPort {
  readonly host: string
  readonly port: number
}

/** Why a port is unusable, or undefined when it is an integer in 1..65535. */
export const checkPort = (port: unknown): string | undefined =>
  typeof port === "number" && Number.isInteger(port) && port >= 1 && port <= 65_535
    ? undefined
    : "the port must be an integer from 1 to 65535"

/** Why a host is unusable, or undefined when it is a non-empty name or IP without spaces. */
export const checkHost = (host: unknown): string | undefined =>
  typeof host === "string" && host.length > 0 && !/[\s/]/.test(host)
    ? undefined
    : "the host must be a non-empty name or IP address"

/**
 * `host:port` (or `[v6]:port`) to its parts, or the reason it is not one. A bare IPv6 address with
 * several colons and no brackets is refused: its port cannot be told from its last group.
 */
export const parse = (address: string): Result.Result<HostPort, string> => {
  const text = address.trim()
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(text)
  const plain = /^([^:[\]]+):(\d+)$/.exec(text)
  const match = bracketed ?? plain
  if (match === null) return Result.fail(`"${address}" is not host:port (IPv6 as [addr]:port)`)
  const host = match[1]!
  const port = Number(match[2])
  const problem = checkHost(host) ?? checkPort(port)
  return problem === undefined ? Result.succeed({ host, port }) : Result.fail(`"${address}": ${problem}`)
}

/**
 * A node name node-redis built itself (`${host}:${port}`, IPv6 unbracketed): the last colon
 * separates the parts. Only for names from the client, never for user input.
 */
export const fromNodeName = (address: string): HostPort => {
  const at = address.lastIndexOf(":")
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) }
}

/** The `host:port` text of a node. */
export const format = (node: HostPort): string => `${node.host}:${node.port}`

/**
 * `text` with the password of every `user:password@` part (URLs, or addresses written with
 * credentials) replaced by `***`, for error messages and `InvalidArgument` values. Each
 * comma- or space-separated entry is treated on its own; the credentials end at the last `@` of the
 * entry's authority, so a password containing `@` or `:` is hidden whole.
 */
export const redactCredentials = (text: string): string =>
  text.replace(/[^\s,]+/g, (entry) => {
    // Quotes or brackets around the entry, then an optional scheme.
    const scheme = /^[^a-z0-9]*(?:[a-z][a-z0-9+.-]*:\/\/)?/i.exec(entry)?.[0] ?? ""
    const rest = entry.slice(scheme.length)
    const authorityEnd = rest.search(/[/?#]/)
    const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd)
    const at = authority.lastIndexOf("@")
    if (at === -1) return entry
    const userinfo = authority.slice(0, at)
    const colon = userinfo.indexOf(":")
    const redacted = colon === -1 ? userinfo : `${userinfo.slice(0, colon)}:***`
    return `${scheme}${redacted}${rest.slice(at)}`
  })

/**
 * Why a `redis://`/`rediss://` URL would be refused (node-redis throws on these while building the
 * client, with the whole URL, password included, on the error), or undefined when it is usable.
 */
export const checkRedisUrl = (url: unknown): string | undefined => {
  if (typeof url !== "string") return "must be a string"
  const parsed = URL.parse(url)
  if (parsed === null) return "is not a valid URL"
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") return "must start with redis:// or rediss://"
  if (parsed.hostname === "") return "has no host"
  if (parsed.pathname !== "" && parsed.pathname !== "/" && !/^\/\d+$/.test(parsed.pathname)) {
    return "may only name a database number as its path (redis://host:port/0)"
  }
  return undefined
}
