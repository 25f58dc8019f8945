// How a worker process the scripts spawn (demo, soak) hears its parent on stdin.
import * as Net from "node:net"

const stopSelf = (): void => {
  process.kill(process.pid, "SIGTERM")
}

/**
 * Listens to the parent on stdin: the returned promise resolves on its "start" line. If stdin closes
 * (the parent died without stopping us), stop as if sent SIGTERM: runMain interrupts the program, so
 * a held lock is released instead of left to expire. Listening does not keep a finished worker alive.
 */
export const startSignal = (): Promise<void> =>
  new Promise((resolve) => {
    let received = ""
    process.stdin.setEncoding("utf8")
    process.stdin.on("data", (chunk: string) => {
      received += chunk
      if (received.includes("start\n")) resolve()
    })
    process.stdin.on("end", stopSelf)
    process.stdin.on("error", stopSelf)
    if (process.stdin instanceof Net.Socket) process.stdin.unref()
  })
