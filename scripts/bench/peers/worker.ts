// One worker process of the peers bench: one library for its whole life, serving the parent's commands
// (protocol.ts) one after the other: `prepare` builds the library's client for the job's lease if it has
// none yet (so connects never fall in a window) and warms up, `start` runs the job in the window. The
// process is reused across workloads and rounds, so starting Node is paid once, not per run. When stdin
// ends (the parent finished or died) it closes its clients and exits.
// Started by processes.ts as `node worker.ts '<WorkerArgs json>'`; with `drivers` in its arguments, the
// library comes from that module's `load` (the semaphores bench's), and this file only serves commands.
import * as Readline from "node:readline"
import { type Load, type Runner, sleepUntil } from "./drivers.ts"
import type { Command, Job, Library, Message, WorkerArgs } from "./protocol.ts"
import * as Requests from "./requests.ts"

// Pipe writes are synchronous on Linux, so a message is out before the process ends.
const send = (message: Message): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`)
}

const loadPeer = async (library: Library, url: string, leaseMillis: number): Promise<Runner> => {
  switch (library) {
    case "sage":
      return (await import("./sage.ts")).make(url, leaseMillis)
    case "sage-ioredis":
      return (await import("./sage.ts")).makeOverIoredis(url, leaseMillis)
    case "redlock":
      return (await import("./drivers.ts")).runner(await (await import("./redlock.ts")).makeRedlock(url, leaseMillis))
    case "sesame":
      return (await import("./drivers.ts")).runner(await (await import("./redlock.ts")).makeSesame(url, leaseMillis))
    case "semaphore":
      return (await import("./drivers.ts")).runner(await (await import("./semaphore.ts")).make(url, leaseMillis))
    case "protocol":
      return (await import("./drivers.ts")).runner(await (await import("./protocolFloor.ts")).make(url, leaseMillis))
    case "baseline":
      return (await import("./drivers.ts")).runner(await (await import("./baseline.ts")).make(url, leaseMillis))
  }
}

const main = async (): Promise<void> => {
  // Written by the parent with WorkerArgsJson; not decoded again here (see protocol.ts).
  const args = JSON.parse(process.argv[2] ?? "") as WorkerArgs
  const drivers = args.drivers
  const load: Load =
    drivers === undefined
      ? (library, url, leaseMillis) => loadPeer(library as Library, url, leaseMillis)
      : async (library, url, leaseMillis) =>
          ((await import(drivers)) as { readonly load: Load }).load(library, url, leaseMillis)
  Requests.install(Number(new URL(args.url).port))
  // One client per lease (@sage/lock fixes the lease per client); every job's keys carry its own prefix.
  const runners = new Map<number, Runner>()
  let job: Job | undefined
  let runner: Runner | undefined
  try {
    for await (const line of Readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
      const command = JSON.parse(line) as Command
      if (command._tag === "prepare") {
        job = command.job
        runner = runners.get(job.leaseMillis)
        if (runner === undefined) {
          runner = await load(args.library, args.url, job.leaseMillis)
          runners.set(job.leaseMillis, runner)
        }
        await runner.warm(job.workload, `${job.namespace}:p${process.pid}:warm`)
        send({ _tag: "ready", pid: process.pid })
      } else if (job !== undefined && runner !== undefined) {
        await sleepUntil(command.from)
        // Only where CPU per cycle is not a headline: counting scans every byte written.
        Requests.setCounting(job.workload._tag === "contended")
        const result = await runner.run(job.workload, `${job.namespace}:p${process.pid}`, command.until)
        Requests.setCounting(false)
        send({ _tag: "result", result })
      }
    }
  } finally {
    // A client that will not close must not keep the process alive.
    setTimeout(() => process.exit(3), 10_000).unref()
    for (const open of runners.values()) await open.close()
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    send({ _tag: "failed", message: error instanceof Error ? (error.stack ?? error.message) : String(error) })
    process.exit(1)
  }
)
