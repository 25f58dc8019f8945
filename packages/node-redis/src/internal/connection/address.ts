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

const hidePassword = (userinfo: string): string => {
  const colon = userinfo.indexOf(":")
  return colon === -1 ? userinfo : `${userinfo.slice(0, colon)}:***`
}

// A URL's credentials, wherever it stands in the text: from its `scheme://` to the last `@` before
// a space, a quote, or the next URL. Passwords often hold `/`, `?`, `#` or `,` unencoded (invalid in
// a URL, which is why they reach an error message at all), so the authority cannot be cut at those.
const urlCredentials = /([a-z][a-z0-9+.-]*:\/\/)((?:(?![a-z][a-z0-9+.-]*:\/\/)[^\s"'`<>])*)@/gi

/**
 * `text` with the password of every `user:password@` part (URLs, or addresses written with
 * credentials) replaced by `***`, for error messages and `InvalidArgument` values. A URL's
 * credentials run to the last `@` before a space, a quote or the next URL, so a password holding
 * `@`, `:`, `/`, `?`, `#` or `,` is hidden whole; an address without a scheme is read per comma- or
 * space-separated entry. A password holding a space can only be hidden whole in a value known to
 * be one URL: see `redactUrl`.
 */
export const redactCredentials = (text: string): string =>
  text
    .replace(urlCredentials, (_match, scheme: string, userinfo: string) => `${scheme}${hidePassword(userinfo)}@`)
    .replace(/[^\s,]+/g, (entry) => {
      if (entry.includes("://")) return entry
      // Quotes or brackets around the entry.
      const lead = /^[^a-z0-9]*/i.exec(entry)?.[0] ?? ""
      const rest = entry.slice(lead.length)
      const authorityEnd = rest.search(/[/?#]/)
      const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd)
      const at = authority.lastIndexOf("@")
      return at === -1 ? entry : `${lead}${hidePassword(authority.slice(0, at))}${rest.slice(at)}`
    })

/**
 * A value given as one URL (an option), for an error message: everything between its scheme and
 * its last `@` is replaced by `***`, user name included, whatever characters the password holds
 * (spaces too). A value without `@` is returned as it is.
 */
export const redactUrl = (url: string): string => {
  const at = url.lastIndexOf("@")
  if (at === -1) return url
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0] ?? ""
  return `${scheme}***${url.slice(at)}`
}

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

/**
 * Client options whose `url` names a bracketed IPv6 host (`redis://[::1]:6379`) rewritten without
 * the URL: node-redis 5 and 6 look the bracketed text up as a host name and fail with `ENOTFOUND`.
 * The URL's parts become options, taking precedence as the URL's would: `socket.host` (unbracketed)
 * and `port` (6379 by default), `tls` for `rediss:`, the decoded user name and password, and the
 * database. Any other options (a valid URL for any other host, or no URL) come back unchanged.
 */
export const withoutBracketedUrl = <
  O extends { readonly url?: string | undefined; readonly socket?: object | undefined }
>(
  options: O
): O => {
  const url = options.url === undefined ? null : URL.parse(options.url)
  if (url === null || !url.hostname.startsWith("[")) return options
  const { url: _url, ...rest } = options
  const database = /^\/(\d+)$/.exec(url.pathname)?.[1]
  return {
    ...rest,
    ...(url.username === "" ? {} : { username: decodeURIComponent(url.username) }),
    ...(url.password === "" ? {} : { password: decodeURIComponent(url.password) }),
    ...(database === undefined ? {} : { database: Number(database) }),
    socket: {
      ...options.socket,
      host: url.hostname.slice(1, -1),
      port: url.port === "" ? 6379 : Number(url.port),
      ...(url.protocol === "rediss:" ? { tls: true } : {})
    }
  } as unknown as O
}
