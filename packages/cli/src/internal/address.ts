// `host:port` lists as the --sentinel and --cluster flags take them. A malformed entry is refused with
// the reason, never guessed at: "10.0.0.5" has no port, and reading its last ".5" as one would point
// the tool somewhere else. (The node-redis package has the same rules internally; they are not part
// of its public API, so the CLI states them again.)
import * as Result from "effect/Result"

export interface HostPort {
  readonly host: string
  readonly port: number
}

/** `host:port` (IPv6 as `[addr]:port`) to its parts, or why it is not one. */
export const parse = (entry: string): Result.Result<HostPort, string> => {
  const text = entry.trim()
  // Never echo what may be credentials typed into an address.
  if (text.includes("@")) return Result.fail("an address holds no credentials: set SAGE_LOCK_PASSWORD instead")
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:[\]\s/]+):(\d+)$/.exec(text)
  if (match === null) return Result.fail(`"${entry}" is not host:port (IPv6 as [addr]:port)`)
  const port = Number(match[2])
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    return Result.fail(`"${entry}": the port must be an integer from 1 to 65535`)
  }
  return Result.succeed({ host: match[1]!, port })
}

/** A comma-separated, non-empty list of `host:port` entries, or why it is not one. */
export const parseList = (list: string): Result.Result<Array<HostPort>, string> => {
  const entries = list
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)
  if (entries.length === 0) return Result.fail("expected host:port[,host:port...]")
  const nodes: Array<HostPort> = []
  for (const entry of entries) {
    const parsed = parse(entry)
    if (Result.isFailure(parsed)) return Result.fail(parsed.failure)
    nodes.push(parsed.success)
  }
  return Result.succeed(nodes)
}

/** The `host:port` text of a node (IPv6 bracketed). */
export const format = (node: HostPort): string =>
  node.host.includes(":") ? `[${node.host}]:${node.port}` : `${node.host}:${node.port}`
