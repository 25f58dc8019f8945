// Which CPUs the bench's processes may run on, for the workload that puts a library's worker and the
// server on one CPU. On this kind of machine (a 2-vCPU virtual machine) a c1 cycle is mostly the two
// processes waking each other across processors; on one CPU that cost goes, and the cycle is the CPU
// the client and the server spend on it. `taskset -a` sets every thread of a process (Node's and
// Redis's helper threads too). Nothing here throws: a machine without `taskset`, or with one CPU,
// reports that it could not pin, and the workload is left out of the run.
import * as ChildProcess from "node:child_process"
import * as Os from "node:os"

/** Every CPU of the machine, as `taskset` writes a list: "0-1". */
export const allCpus = (): string => `0-${Math.max(0, Os.cpus().length - 1)}`

/** Sets the CPUs of every thread of each process; false if any could not be set. */
export const setCpus = (pids: ReadonlyArray<number>, cpus: string): boolean => {
  if (Os.cpus().length < 2) return false
  for (const pid of pids) {
    if (!(pid > 0)) return false
    const done = ChildProcess.spawnSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" })
    if (done.status !== 0) return false
  }
  return true
}
