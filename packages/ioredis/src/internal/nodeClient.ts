// One ioredis client of the lock's own to one node (a sentinel, a master, a Cluster node): the
// application's options for that kind of node, its address, not connected yet, no ready check (it
// asks INFO, which a least-privilege lock user may not run), and its errors kept from ioredis's
// console output (the lock reports what concerns its calls).
import { Redis, type RedisOptions } from "ioredis"

export const nodeClient = (
  options: RedisOptions,
  node: { readonly host: string; readonly port: number },
  own: RedisOptions
): Redis => {
  const redis = new Redis({
    ...options,
    host: node.host,
    port: node.port,
    lazyConnect: true,
    enableReadyCheck: false,
    ...own
  })
  redis.on("error", () => {})
  return redis
}
