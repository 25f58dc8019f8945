// Sending on a connection of the lock's own: each command is written at once, and the commands of one
// tick leave in one write. The first command of a tick corks the socket and the uncork is queued
// behind the tick's promise callbacks, so the server reads them together (as with ioredis's
// auto-pipelining, but without its `Pipeline` per tick, its extra Promise and callback per command and
// its `setImmediate` hop, which a lone command waits for too: at 64 calls at once that was a third of
// the client's CPU, most of it garbage).
import { Command, type Redis } from "ioredis"

export const corkedSend = (redis: Redis) => {
  // The client's options are fixed once it is made: read them once, not on every command.
  const { keyPrefix, showFriendlyErrorStack } = redis.options
  const options = { replyEncoding: "utf8" as const, ...(keyPrefix === undefined ? {} : { keyPrefix }) }
  let corked: Redis["stream"] | undefined
  const uncork = () => {
    const stream = corked
    corked = undefined
    stream?.uncork()
  }
  return (args: ReadonlyArray<string>): Promise<unknown> => {
    if (corked === undefined && redis.status === "ready" && redis.stream !== undefined) {
      corked = redis.stream
      corked.cork()
      process.nextTick(uncork)
    }
    const command = new Command(
      args[0]!,
      args.slice(1),
      showFriendlyErrorStack === true ? { ...options, errorStack: new Error() } : options
    )
    return redis.sendCommand(command) as Promise<unknown>
  }
}
