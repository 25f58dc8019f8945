// Which of several pipelined connections to one node carries a lock's commands.
//
// One connection alternates with the server: the client parses a batch of replies and prepares the
// next batch while the server waits, then the server runs it while the client waits. With two, each
// side works on one connection's batch while the other side works on the other's. Keys are spread
// by a hash, so one lock always uses the same connection and its commands stay in the order sent.

/**
 * Which of `lanes` connections carries the commands of `lockKey`: a hash of the key (FNV-1a), so
 * one lock always uses the same connection (its acquire, renew, release and hand-on stay in the
 * order sent).
 */
export const laneOf = (lockKey: string, lanes: number): number => {
  if (lanes === 1) return 0
  let hash = 0x811c9dc5
  for (let i = 0; i < lockKey.length; i++) hash = Math.imul(hash ^ lockKey.charCodeAt(i), 0x01000193)
  return (hash >>> 0) % lanes
}
