// Nodes that applied a lock write while they were not the master in the client's view (a demoted
// or stale master, a view that changed mid-operation). The lock's cleanup releases through the
// current master, which never saw that write; without this record the stray node would keep the
// key until its lease ran out, and a client that still routes to it would find the lock busy.
//
// Entries are taken by the next release for the same key and token; the oldest are dropped beyond
// `limit`, so a release that never comes cannot grow the record without bound.

export interface StrayWrites {
  /** Notes that `address` holds a write for `key` with `token`. */
  readonly remember: (key: string, token: string, address: string) => void
  /** The nodes noted for `key` and `token`, forgetting them. */
  readonly take: (key: string, token: string) => ReadonlyArray<string>
}

const id = (key: string, token: string): string => `${token}\u0000${key}`

export const make = (limit = 10_000): StrayWrites => {
  const nodes = new Map<string, Set<string>>()
  return {
    remember: (key, token, address) => {
      const entry = nodes.get(id(key, token)) ?? new Set<string>()
      entry.add(address)
      nodes.set(id(key, token), entry)
      if (nodes.size > limit) nodes.delete(nodes.keys().next().value!)
    },
    take: (key, token) => {
      const entry = nodes.get(id(key, token))
      nodes.delete(id(key, token))
      return entry === undefined ? [] : [...entry]
    }
  }
}
