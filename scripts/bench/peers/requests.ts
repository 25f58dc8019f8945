// Counts the requests a worker process sends to the server, for every library alike: it watches the
// bytes written on sockets to the server's port and counts RESP arrays (`*N` then N bulk strings), the
// form every client here sends commands in. The server's own counters cannot tell this: INFO
// commandstats also counts each command a script runs, so one EVALSHA can show up as three calls.
// It costs a scan of every byte written, so it counts only where CPU per cycle is not a headline. It is
// switched between runs, never inside a command: clients write each command within one tick.
import * as Net from "node:net"

interface State {
  /** 0: in an array header, 1: in a bulk-string header, 2: inside a bulk string's bytes. */
  phase: 0 | 1 | 2
  number: number
  /** Bulk strings left in the current command. */
  left: number
  /** Bytes left of the current bulk string, with its CRLF. */
  remaining: number
}

let requests = 0
let counting = false

const feed = (state: State, bytes: Uint8Array): void => {
  let i = 0
  while (i < bytes.length) {
    if (state.phase === 2) {
      const take = Math.min(state.remaining, bytes.length - i)
      i += take
      state.remaining -= take
      if (state.remaining === 0) {
        state.left--
        state.phase = state.left > 0 ? 1 : 0
      }
      continue
    }
    const byte = bytes[i++]!
    if (byte === 10) {
      if (state.phase === 0) {
        requests++
        state.left = state.number
        state.phase = state.left > 0 ? 1 : 0
      } else {
        state.remaining = state.number + 2
        state.phase = 2
      }
      state.number = 0
    } else if (byte >= 48 && byte <= 57) {
      state.number = state.number * 10 + byte - 48
    }
  }
}

/** Watches sockets to `port` (counting only while `setCounting(true)`); read the total with `sent`. */
export const install = (port: number): void => {
  const states = new WeakMap<Net.Socket, State>()
  const write = Net.Socket.prototype.write as (this: Net.Socket, chunk: unknown, ...rest: Array<unknown>) => boolean
  const counted = function (this: Net.Socket, chunk: unknown, ...rest: Array<unknown>): boolean {
    if (counting && this.remotePort === port) {
      let state = states.get(this)
      if (state === undefined) {
        state = { phase: 0, number: 0, left: 0, remaining: 0 }
        states.set(this, state)
      }
      if (typeof chunk === "string")
        feed(state, Buffer.from(chunk, typeof rest[0] === "string" ? (rest[0] as BufferEncoding) : "utf8"))
      else if (chunk instanceof Uint8Array) feed(state, chunk)
    }
    return write.call(this, chunk, ...rest)
  }
  Net.Socket.prototype.write = counted as typeof Net.Socket.prototype.write
}

/** Requests sent so far on counted sockets. */
export const sent = (): number => requests

/** Turns counting on or off; off, a write costs one flag check. */
export const setCounting = (on: boolean): void => {
  counting = on
}
