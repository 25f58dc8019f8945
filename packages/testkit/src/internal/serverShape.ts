// What a running server looks like to a test, whether the kit started it from a local binary
// (RedisServer.ts) or in a container (Docker.ts): both build one, so the shape lives below both.
import type * as Effect from "effect/Effect"
import type * as ServerBinary from "../ServerBinary.ts"
import type { TestkitError } from "../TestkitError.ts"
import type * as Client from "./client.ts"
import type * as Tls from "./tls.ts"

/** A running server owned by a scope. */
export interface RedisServer extends Client.Commands {
  readonly flavor: ServerBinary.Flavor
  readonly host: string
  readonly port: number
  /** `redis://127.0.0.1:PORT` (`rediss://` for a TLS server) */
  readonly url: string
  /** The certificates of a TLS server (`tls: true`), else undefined. */
  readonly tls: Tls.Certificates | undefined
  /** The temp directory holding server.log and stdio.log ("" in Docker mode). */
  readonly dir: string
  /** The extra arguments given to `start` (reused by `restart`). */
  readonly args: ReadonlyArray<string>
  /** The pid of the current process (changes on restart; -1 in Docker mode or before the first start). */
  readonly pid: number
  /** Whether the current process has not exited. */
  readonly running: boolean
  /** Whether the process is stopped by `pause`. */
  readonly paused: boolean
  /** The last `lines` (default 40) lines of the server log and of stdout/stderr. */
  readonly logTail: (lines?: number) => Effect.Effect<string>
  /** SIGSTOP: the process freezes; new TCP connects still succeed, commands get no reply. */
  readonly pause: Effect.Effect<void, TestkitError>
  /** SIGCONT after `pause`. */
  readonly resume: Effect.Effect<void, TestkitError>
  /** SIGKILL and wait for the exit; a no-op when it already exited. */
  readonly kill: Effect.Effect<void, TestkitError>
  /** Kill if running, then start again on the same port with the same arguments (empty data set). */
  readonly restart: Effect.Effect<void, TestkitError>
}
