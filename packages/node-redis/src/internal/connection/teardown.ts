// Closing a node-redis client for good, whatever state it is in.
//
// Both supported node-redis lines can leave a socket open after the lock layer closed, which keeps
// the application's process alive:
// - A connection attempt in flight is not cancelled by `destroy()`. node-redis 6.3 finishes it and
//   the client becomes ready again (found by the fault matrix, a Sentinel worker kept alive). In
//   node-redis 5 it is worse: the attempt's socket is created after the `destroy()`, the client then
//   counts as closed, and every later `destroy()` throws "The client is closed": that socket can no
//   longer be reached at all.
// - `isOpen` is false as soon as a `close()` has begun, so a `destroy()` guarded by it skipped a
//   close that waited on a stalled server. node-redis 6 destroys such a client when asked; node-redis
//   5 refuses (it throws), so there the socket is only unreferenced: it no longer keeps the process
//   alive, and it closes once the server answers what the close waits for.
// So: a client that is connecting is destroyed as soon as its attempt reports (`connect`: its socket
// exists and the client still counts as open) or fails and is about to retry (`reconnecting`), or
// after a grace if it does neither; any other client is destroyed at once; and a destroy that throws
// falls back to unreferencing.

/** The part of a node-redis client (`createClient`, or a duplicate) this needs. */
export interface Destroyable {
  readonly isOpen: boolean
  readonly isReady: boolean
  on(event: "connect" | "reconnecting", listener: () => void): unknown
  destroy(): unknown
  unref(): unknown
}

const watched = new WeakSet<Destroyable>()

/** Whether a connection attempt is in flight: open (not closed by anyone) but not ready yet. */
const connecting = (client: { readonly isOpen: boolean; readonly isReady: boolean }): boolean =>
  client.isOpen && !client.isReady

const destroyQuietly = (client: Destroyable): void => {
  try {
    client.destroy()
  } catch {
    // node-redis 5 refuses to destroy a client it counts as closed (see above): let it at least not
    // hold the process open.
    try {
      client.unref()
    } catch {
      // Nothing more can be done from outside node-redis.
    }
  }
}

/**
 * Destroys `client` whenever it reports a connection or a retry from now on, without touching it
 * now: for a client that something else is about to close (a cluster client's node connections,
 * which its own `close()` visits), so that an attempt in flight cannot outlive that close. Safe to
 * call twice.
 */
export const destroyOnLateConnect = (client: Destroyable): void => {
  if (watched.has(client)) return
  watched.add(client)
  client.on("connect", () => destroyQuietly(client))
  client.on("reconnecting", () => destroyQuietly(client))
}

/** How long a connection attempt in flight may take to report before its client is destroyed anyway. */
export const attemptGraceMillis = 1_000

/**
 * Destroys `client` for good: at once, or, while a connection attempt is in flight, as soon as that
 * attempt connects or fails (destroying it in the middle would orphan its socket in node-redis 5).
 * Safe on a client that is connecting, ready, reconnecting, closing or closed, and safe to call twice.
 */
export const destroyForGood = (client: Destroyable): void => {
  destroyOnLateConnect(client)
  if (connecting(client)) {
    // Connecting: the watcher destroys it when the attempt reports. An attempt that reports neither
    // (a handshake a stalled server never answers, a connect that hangs) is destroyed after a grace.
    setTimeout(() => destroyQuietly(client), attemptGraceMillis).unref()
    return
  }
  destroyQuietly(client)
}

/** What `attemptSettled` needs: a client whose attempts report their end. */
export interface Settling {
  readonly isOpen: boolean
  readonly isReady: boolean
  on(event: "connect" | "reconnecting" | "error" | "end", listener: () => void): unknown
}

const settlingEvents = ["connect", "reconnecting", "error", "end"] as const

/**
 * Resolves once `client` has no connection attempt in flight: at once if it is not connecting, else
 * when the attempt connects, fails or is about to retry. For a client something else closes: a
 * `close()` that runs while the attempt's socket does not exist yet orphans that socket in
 * node-redis 5 (the cluster client's `close()` does that to its node connections). Bound it with
 * `attemptGraceMillis`.
 */
export const attemptSettled = (client: Settling): Promise<void> =>
  connecting(client)
    ? new Promise<void>((resolve) => {
        for (const event of settlingEvents) client.on(event, () => resolve())
      })
    : Promise.resolve()
