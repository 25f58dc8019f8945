// An ioredis client the backend opened, as `CommandBackend.replaceWhenSilent` needs it: it reports
// ready by its `status`, announces each new connection with `ready`, and is closed at once with
// `disconnect()`. Its commands still waiting then fail with ioredis's "Connection is closed.", which
// would read as a client closed for good: they fail as `ConnectionGone` instead, retryable.
import type { Redis } from "ioredis"
import type * as CommandBackend from "@sage/lock-node-redis/CommandBackend"
import { ConnectionGone } from "./classify.ts"
import { corkedSend } from "./corked.ts"

export const replaceable = (redis: Redis): CommandBackend.ReplaceableClient => {
  let replaced = false
  const send = corkedSend(redis)
  return {
    get isReady() {
      return redis.status === "ready"
    },
    send: (args) =>
      send(args).catch((error: unknown) => {
        throw replaced ? new ConnectionGone("the connection went silent and was replaced", error) : error
      }),
    on: (event, listener) => redis.on(event, listener),
    destroy: () => {
      replaced = true
      redis.disconnect()
    }
  }
}
