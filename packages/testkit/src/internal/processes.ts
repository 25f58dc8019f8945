/**
 * Backstops that kill every server process this test process spawned, even when scopes never close:
 * - a `process.on("exit")` hook (normal exit, `process.exit`, an uncaught error);
 * - a detached bash watchdog that reads pids on stdin and, on EOF, SIGKILLs those still listed. Its
 *   stdin closes when this process dies in any way (SIGTERM from a pool, SIGKILL), which the exit
 *   hook cannot see. Exited pids are unlisted at once, so a recycled pid is never signalled.
 */
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"

const live = new Set<ChildProcess.ChildProcess>()
let watchdog: ChildProcess.ChildProcess | undefined
let installed = false

const watchdogScript = [
  "declare -A pids",
  "while IFS= read -r line; do",
  '  case "$line" in -*) unset "pids[${line#-}]" ;; ?*) pids[$line]=1 ;; esac',
  "done",
  'for pid in "${!pids[@]}"; do kill -CONT "$pid"; kill -KILL "$pid"; done 2>/dev/null',
  "exit 0"
].join("\n")

const tell = (line: string): void => {
  const stdin = watchdog?.stdin
  if (stdin && stdin.writable) stdin.write(`${line}\n`)
}

const install = (): void => {
  if (installed) return
  installed = true
  process.on("exit", () => {
    for (const child of live) {
      try {
        child.kill("SIGCONT")
        child.kill("SIGKILL")
      } catch {
        // already gone
      }
    }
  })
  try {
    const dog = ChildProcess.spawn("bash", ["-c", watchdogScript], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"]
    })
    dog.on("error", () => {
      watchdog = undefined
    })
    dog.stdin.on("error", () => {
      watchdog = undefined
    })
    // Neither the watchdog nor its pipe may keep the test process alive.
    dog.unref()
    if (dog.stdin instanceof Net.Socket) dog.stdin.unref()
    watchdog = dog
  } catch {
    // no bash: the exit hook alone remains
  }
}

/** Registers a freshly spawned child with both backstops; unregisters it when it exits. */
export const track = (child: ChildProcess.ChildProcess): void => {
  install()
  const pid = child.pid
  if (pid === undefined) return
  live.add(child)
  tell(String(pid))
  child.once("exit", () => {
    live.delete(child)
    tell(`-${pid}`)
  })
}

/** The pids of tracked children that have not exited yet (for diagnostics and tests). */
export const livePids = (): Array<number> => [...live].flatMap((child) => (child.pid === undefined ? [] : [child.pid]))
