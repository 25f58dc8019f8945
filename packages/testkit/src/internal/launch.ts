/**
 * Spawning one server process and waiting until it is ready. Plain promises: RedisServer wraps them.
 *
 * Readiness means `INFO server` answers with `process_id` equal to the spawned pid. Checking the pid
 * (not just PING) matters: when a random port is taken, our server exits with "Address already in
 * use" while someone else's server answers PING on that port.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { track } from "./processes.ts"
import { oneShot } from "./resp.ts"

/** The lowest port drawn: together with `portMax` keeps port+10000 (cluster bus) below 32768. */
export const portMin = 10000
/** The highest port drawn. */
export const portMax = 22767

/** A random port in [portMin, portMax]. */
export const randomPort = (): number => portMin + Math.floor(Math.random() * (portMax - portMin + 1))

/** Resolves true when 127.0.0.1:port can be bound right now (a cheap pre-check, not a reservation). */
export const isPortFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => server.close(() => resolve(true)))
  })

/** How a process ended. */
export interface ExitInfo {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly error?: Error | undefined
}

/** A spawned server process. `exit` is set once it has exited (or failed to spawn). */
export interface Running {
  readonly child: ChildProcess.ChildProcess
  readonly exited: Promise<ExitInfo>
  exit: ExitInfo | undefined
}

/** The two log files of a server directory. */
export const logFiles = (dir: string): { readonly server: string; readonly stdio: string } => ({
  server: Path.join(dir, "server.log"),
  stdio: Path.join(dir, "stdio.log")
})

const fileSize = (path: string): number => {
  try {
    return Fs.statSync(path).size
  } catch {
    return 0
  }
}

const readFrom = (path: string, offset: number): string => {
  try {
    return Fs.readFileSync(path).subarray(offset).toString("utf8")
  } catch {
    return ""
  }
}

/** Spawns `bin argv` with stdout/stderr appended to stdio.log, registered with the process backstops. */
export const spawnServer = (bin: string, argv: ReadonlyArray<string>, dir: string): Running => {
  const fd = Fs.openSync(logFiles(dir).stdio, "a")
  let child: ChildProcess.ChildProcess
  try {
    // `bin` is spawned as given (never resolved): valkey-server picks its mode from argv[0].
    child = ChildProcess.spawn(bin, [...argv], { stdio: ["ignore", fd, fd], cwd: dir })
  } finally {
    Fs.closeSync(fd)
  }
  track(child)
  const running: Running = {
    child,
    exit: undefined,
    exited: new Promise<ExitInfo>((resolve) => {
      child.once("exit", (code, signal) => {
        running.exit = { code, signal }
        resolve(running.exit)
      })
      child.once("error", (error) => {
        // Spawn failures (ENOENT, EACCES) emit "error" and never "exit".
        if (child.pid === undefined) {
          running.exit = { code: null, signal: null, error }
          resolve(running.exit)
        }
      })
    })
  }
  return running
}

/** What came of waiting for a launched server. */
export type Readiness =
  { readonly _tag: "Ready" } | { readonly _tag: "AddressInUse" } | { readonly _tag: "Failed"; readonly detail: string }

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Polls `INFO server` on host:port until the process answers with its own pid, exits, or the
 * deadline passes. Log offsets mark where this launch's output starts, so earlier launches in the
 * same directory do not confuse the "Address already in use" check.
 */
export const waitReady = async (
  running: Running,
  host: string,
  port: number,
  dir: string,
  timeoutMs: number,
  signal: AbortSignal,
  offsets: { readonly server: number; readonly stdio: number },
  tls?: { readonly ca: string } | undefined
): Promise<Readiness> => {
  const files = logFiles(dir)
  const deadline = performance.now() + timeoutMs
  let last = "no reply yet"
  while (!signal.aborted) {
    if (running.exit !== undefined) {
      const output = readFrom(files.server, offsets.server) + readFrom(files.stdio, offsets.stdio)
      if (output.includes("Address already in use")) return { _tag: "AddressInUse" }
      const how = running.exit.error
        ? `failed to spawn: ${running.exit.error.message}`
        : `exited with code ${running.exit.code} signal ${running.exit.signal}`
      return { _tag: "Failed", detail: `the server ${how}` }
    }
    if (performance.now() > deadline) {
      return { _tag: "Failed", detail: `the server did not answer within ${timeoutMs} ms (last: ${last})` }
    }
    try {
      const reply = await oneShot(host, port, ["INFO", "server"], 1000, tls)
      const pid = /process_id:(\d+)/.exec(reply.text)?.[1]
      if (!reply.error && pid !== undefined && Number(pid) === running.child.pid) return { _tag: "Ready" }
      last = reply.error ? reply.text : `process_id ${pid ?? "?"} is not ours (${running.child.pid})`
    } catch (error) {
      last = error instanceof Error ? error.message : String(error)
    }
    await sleep(15)
  }
  return { _tag: "Failed", detail: "interrupted" }
}

/** Current sizes of a directory's log files, taken before a launch. */
export const logOffsets = (dir: string): { readonly server: number; readonly stdio: number } => {
  const files = logFiles(dir)
  return { server: fileSize(files.server), stdio: fileSize(files.stdio) }
}

/** The last `lines` lines of both log files, labelled; never throws. */
export const readLogTail = (dir: string, lines: number): string => {
  const files = logFiles(dir)
  const tail = (path: string): string => {
    const text = readFrom(path, 0).trimEnd()
    return text === "" ? "" : text.split("\n").slice(-lines).join("\n")
  }
  const server = tail(files.server)
  const stdio = tail(files.stdio)
  return [
    `--- ${files.server}`,
    server === "" ? "(empty)" : server,
    ...(stdio === "" ? [] : [`--- ${files.stdio}`, stdio])
  ].join("\n")
}

/** SIGCONT (a stopped process cannot act on anything else) then SIGKILL; waits up to `timeoutMs`. */
export const killAndWait = async (running: Running, timeoutMs: number): Promise<boolean> => {
  if (running.exit !== undefined) return true
  try {
    running.child.kill("SIGCONT")
    running.child.kill("SIGKILL")
  } catch {
    // exited between the check and the signal
  }
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs)
  })
  return Promise.race([running.exited.then(() => true), timedOut]).finally(() => clearTimeout(timer))
}
