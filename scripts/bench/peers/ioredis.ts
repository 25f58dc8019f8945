// The ioredis client the three ioredis-based peers share in a worker: its defaults (no auto-pipelining,
// offline queue on), connected before the worker reports ready so no handshake falls in a measurement.
import { Redis } from "ioredis"

export const connect = async (url: string): Promise<Redis> => {
  const client = new Redis(url, { lazyConnect: true })
  await client.connect()
  return client
}
