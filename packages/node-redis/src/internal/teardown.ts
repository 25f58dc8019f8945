// Closing a node-redis client for good, whatever state it is in.
//
// node-redis 6.3 does not cancel a connection attempt in flight when `destroy()` is called: the
// socket that was connecting finishes, the client becomes ready again, and that socket keeps the
// process alive after the lock layer has closed (the fault matrix found a worker kept alive by one
// such socket after its Sentinel backend closed). And `isOpen` is false as soon as a `close()` has
// begun, so a `destroy()` guarded by it skipped a close that timed out on a stalled server, leaving
// its socket open. So: destroy without checking, ignore "already closed" (node-redis 5 throws it),
// and destroy again should the client report a new connection later.

/** The part of a node-redis client (`createClient`, or a duplicate) this needs. */
export interface Destroyable {
  on(event: "connect", listener: () => void): unknown
  destroy(): unknown
}

const watched = new WeakSet<Destroyable>()

const destroyQuietly = (client: Destroyable): void => {
  try {
    client.destroy()
  } catch {
    // Already closed (node-redis 5 throws): nothing left to free.
  }
}

/**
 * Destroys `client` whenever it reports a connection from now on, without touching it now: for a
 * client that something else is about to close (a cluster client's node connections, which its own
 * `close()` visits), so that an attempt in flight cannot outlive that close. Safe to call twice.
 */
export const destroyOnLateConnect = (client: Destroyable): void => {
  if (watched.has(client)) return
  watched.add(client)
  client.on("connect", () => destroyQuietly(client))
}

/**
 * Destroys `client` now, and again if a connection it was opening completes afterwards. Safe on a
 * client that is connecting, ready, reconnecting, closing or closed, and safe to call twice.
 */
export const destroyForGood = (client: Destroyable): void => {
  destroyOnLateConnect(client)
  destroyQuietly(client)
}
