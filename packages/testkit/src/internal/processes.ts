/**
 * Backstops that kill every server process this test process spawned (and remove its temp
 * directories), even when scopes never close:
 * - a `process.on("exit")` hook (normal exit, `process.exit`, an uncaught error);
 * - a detached bash watchdog that reads pids on stdin and, on EOF, SIGKILLs those still listed. Its
 *   stdin closes when this process dies in any way (SIGTERM from a pool, SIGKILL), which the exit
 *   hook cannot see. Exited pids are unlisted at once, so a recycled pid is never signalled, and
 *   only directories this process created with mkdtemp are ever listed for removal.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"

const live = new Set<ChildProcess.ChildProcess>()
const dirs = new Set<string>()
let watchdog: ChildProcess.ChildProcess | undefined
let installed = false

const watchdogScript = [
  "declare -A pids dirs",
  "while IFS= read -r line; do",
  '  case "$line" in',
  '    -dir:*) unset "dirs[${line#-dir:}]" ;;',
  "    dir:*) dirs[${line#dir:}]=1 ;;",
  '    -*) unset "pids[${line#-}]" ;;',
  "    ?*) pids[$line]=1 ;;",
  "  esac",
  "done",
  'for pid in "${!pids[@]}"; do kill -CONT "$pid"; kill -KILL "$pid"; done 2>/dev/null',
  // Give the killed servers a moment to be gone before their directories are removed.
  'for i in 1 2 3 4 5 6 7 8 9 10; do alive=; for pid in "${!pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done; [ -z "$alive" ] && break; sleep 0.1; done',
  'for dir in "${!dirs[@]}"; do rm -rf -- "$dir"; done',
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
    for (const dir of dirs) {
      try {
        Fs.rmSync(dir, { recursive: true, force: true })
      } catch {
        // a still-dying server may hold it: the watchdog retries after the kill
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

/** Registers a temp directory to remove if this process dies before its scope closes. */
export const trackDir = (dir: string): void => {
  install()
  dirs.add(dir)
  tell(`dir:${dir}`)
}

/** Unregisters a directory (after its scope removed it). */
export const untrackDir = (dir: string): void => {
  dirs.delete(dir)
  tell(`-dir:${dir}`)
}

/** The pids of tracked children that have not exited yet (for diagnostics and tests). */
export const livePids = (): Array<number> => [...live].flatMap((child) => (child.pid === undefined ? [] : [child.pid]))
