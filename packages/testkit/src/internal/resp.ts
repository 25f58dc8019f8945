/**
 * A raw RESP connection for the few places where node-redis is the wrong tool: readiness probes
 * against a server that is still starting, and fire-and-forget commands (DEBUG SLEEP) whose write
 * must be known to have left this process.
 */
import * as Net from "node:net"
import * as Tls from "node:tls"

/** Encodes a command as a RESP array of bulk strings. */
export const encode = (args: ReadonlyArray<string>): Buffer => {
  const parts: Array<Buffer> = [Buffer.from(`*${args.length}\r\n`)]
  for (const arg of args) {
    const body = Buffer.from(arg)
    parts.push(Buffer.from(`$${body.length}\r\n`), body, Buffer.from("\r\n"))
  }
  return Buffer.concat(parts)
}

/** One parsed reply: simple/bulk/integer text, or an error reply's text. */
export interface RawReply {
  readonly error: boolean
  readonly text: string
}

/** Parses the first reply in `buf` if it is complete (simple, error, integer or bulk; not arrays). */
export const parseOne = (buf: Buffer): RawReply | undefined => {
  const lineEnd = buf.indexOf("\r\n")
  if (lineEnd < 0) return undefined
  const head = buf.toString("utf8", 1, lineEnd)
  switch (buf[0]) {
    case 0x2b: // +
    case 0x3a: // :
      return { error: false, text: head }
    case 0x2d: // -
      return { error: true, text: head }
    case 0x24: {
      // $
      const length = Number(head)
      if (length < 0) return { error: false, text: "" }
      const start = lineEnd + 2
      if (buf.length < start + length + 2) return undefined
      return { error: false, text: buf.toString("utf8", start, start + length) }
    }
    default:
      return { error: true, text: `unexpected RESP type byte ${buf[0]}` }
  }
}

/**
 * Opens a connection, sends one command and resolves with its reply. Rejects on connection errors
 * or after `timeoutMs`; the socket is always destroyed when the promise settles.
 */
export const oneShot = (
  host: string,
  port: number,
  args: ReadonlyArray<string>,
  timeoutMs: number,
  tls?: { readonly ca: string } | undefined
): Promise<RawReply> =>
  new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0)
    const socket = tls === undefined ? Net.connect({ host, port }) : Tls.connect({ host, port, ca: tls.ca })
    const timer = setTimeout(() => finish(new Error(`no reply to ${args[0]} within ${timeoutMs} ms`)), timeoutMs)
    const finish = (outcome: RawReply | Error): void => {
      clearTimeout(timer)
      socket.destroy()
      if (outcome instanceof Error) reject(outcome)
      else resolve(outcome)
    }
    socket.on(tls === undefined ? "connect" : "secureConnect", () => socket.write(encode(args)))
    socket.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk])
      const reply = parseOne(buf)
      if (reply !== undefined) finish(reply)
    })
    socket.on("error", (error) => finish(error))
    socket.on("close", () => finish(new Error("connection closed before a reply")))
  })
