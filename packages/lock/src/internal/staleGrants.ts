// Grants this client held whose release failed: the key may still hold the grant's token,
// `<waiter id>:<fence>`, and the acquire script hands a key in that state to any caller that presents
// the waiter id, which every call of this client shares. A later call of the client would then take
// the lost holder's grant again, with the same fencing token, where a new grant must have a greater
// one. So the client remembers each such grant until its lease must have ended on the server, and an
// acquisition answered with that fence releases the key and asks again (the next grant is new).

/** The fence of each key's grant whose release failed, and until when (monotonic ms) it may live. */
export type StaleGrants = Map<string, { readonly fence: number; readonly until: number }>

export const make = (): StaleGrants => new Map()

/** Remembers that `key` may still hold this client's grant `fence` until `until` (monotonic ms). */
export const remember = (grants: StaleGrants, key: string, fence: number, until: number): void => {
  grants.set(key, { fence, until })
}

/** The fence of `key`'s grant that may still be held at the server now, dropping an expired one. */
export const fenceOf = (grants: StaleGrants, key: string, now: number): number | undefined => {
  const entry = grants.get(key)
  if (entry === undefined) return undefined
  if (entry.until <= now) {
    grants.delete(key)
    return undefined
  }
  return entry.fence
}
