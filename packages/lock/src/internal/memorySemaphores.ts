// The semaphores of `MemoryBackend`: what `SemaphoreScripts` keeps on a server, kept in a map and
// timed by the backend's clock (Effect's `Clock`, so `TestClock` drives it in tests).
//
// The rules are the scripts' own: holders expire at the end of their lease; the limit is stored
// while anyone holds or waits; the line is first come, first served, served from its head with
// what is free until a request does not fit; a served waiter gets its permits reserved for the
// claim window under `<waiter id>:<fence>`, and its next attempt takes them.
import type { AcquireReply, LeaseRequest, ReleaseReply } from "../LockBackend.ts"
import { grantingWaiterPrefix, ownChannelWaiterPrefix } from "./lua.ts"

interface Holder {
  readonly count: number
  readonly fence: number
  expiresAt: number
}

interface Waiter {
  readonly ask: number
  lapsesAt: number
}

interface State {
  limit: number
  readonly holders: Map<string, Holder>
  /** The waiters in arrival order (a Map keeps insertion order; a refresh keeps the place). */
  readonly line: Map<string, Waiter>
  /** The grant reserved for a served waiter: its id -> the holder token. */
  readonly reserved: Map<string, string>
}

export interface Hooks {
  readonly issueFence: (key: string, now: number) => number
  readonly lastFence: (key: string, now: number) => number
  readonly keepFence: (key: string, now: number) => void
  /** Tells a waiter its turn came. */
  readonly wake: (key: string, waiterId: string) => void
  readonly claimMillis: number
}

export class MemorySemaphores {
  private readonly states = new Map<string, State>()
  private readonly hooks: Hooks
  constructor(hooks: Hooks) {
    this.hooks = hooks
  }

  /** The state of `key` with ended leases and lapsed registrations dropped, or none when unused. */
  private live(key: string, now: number): State | undefined {
    const state = this.states.get(key)
    if (state === undefined) return undefined
    for (const [token, holder] of state.holders) if (holder.expiresAt <= now) this.drop(state, token)
    for (const [id, waiter] of state.line) if (waiter.lapsesAt <= now) state.line.delete(id)
    if (state.holders.size === 0 && state.line.size === 0) {
      this.states.delete(key)
      return undefined
    }
    return state
  }

  private drop(state: State, token: string): void {
    state.holders.delete(token)
    const colon = token.lastIndexOf(":")
    if (colon > 0 && state.reserved.get(token.slice(0, colon)) === token) state.reserved.delete(token.slice(0, colon))
  }

  private used(state: State): number {
    let used = 0
    for (const holder of state.holders.values()) used += holder.count
    return used
  }

  /** Serves the line from its head; answers whether it reached `caller` with room for it. */
  private serve(key: string, state: State, now: number, caller?: string): boolean {
    let free = state.limit - this.used(state)
    for (const [id, waiter] of state.line) {
      if (free <= 0 || waiter.ask > free) return false
      if (id === caller) return true
      // A waiter that polls rather than listens keeps its turn (see SemaphoreScripts).
      if (!id.startsWith(grantingWaiterPrefix) && !id.startsWith(ownChannelWaiterPrefix)) return false
      const fence = this.hooks.issueFence(key, now)
      const token = `${id}:${fence}`
      state.holders.set(token, { count: waiter.ask, fence, expiresAt: now + this.hooks.claimMillis })
      state.reserved.set(id, token)
      state.line.delete(id)
      free -= waiter.ask
      this.hooks.wake(key, id)
    }
    return false
  }

  acquire(request: LeaseRequest, now: number): AcquireReply {
    const { key, token } = request
    const { count, limit } = request.permits!
    const waiter = request.waiter?.id
    let state = this.live(key, now)
    if (state !== undefined && state.limit !== limit) return { _tag: "LimitConflict", limit: state.limit }
    const own = state?.holders.get(token)
    if (own !== undefined) {
      own.expiresAt = now + request.leaseMillis
      return { _tag: "Acquired", fence: own.fence }
    }
    if (state !== undefined && waiter !== undefined) {
      const reserved = state.reserved.get(waiter)
      const grant = reserved === undefined ? undefined : state.holders.get(reserved)
      if (reserved !== undefined) this.drop(state, reserved)
      if (grant !== undefined && grant.count === count) {
        // A new token, as the script issues: the reservation may be an earlier call's, and grants
        // since have newer tokens.
        const fence = this.hooks.issueFence(key, now)
        state.holders.set(token, { count, fence, expiresAt: now + request.leaseMillis })
        return { _tag: "Acquired", fence }
      }
    }
    if (state === undefined) {
      state = { limit, holders: new Map(), line: new Map(), reserved: new Map() }
      this.states.set(key, state)
    }
    const mine = state.line.size === 0 || this.serve(key, state, now, waiter ?? "")
    if (mine && count <= state.limit - this.used(state)) {
      const fence = this.hooks.issueFence(key, now)
      state.holders.set(token, { count, fence, expiresAt: now + request.leaseMillis })
      if (waiter !== undefined) state.line.delete(waiter)
      return { _tag: "Acquired", fence }
    }
    let first = Infinity
    for (const holder of state.holders.values()) first = Math.min(first, holder.expiresAt)
    const remainingMillis = first === Infinity ? -2 : Math.ceil(first - now)
    if (request.waiter === undefined) {
      this.live(key, now)
      return { _tag: "Busy", remainingMillis }
    }
    const registration = state.line.get(request.waiter.id)
    if (registration === undefined) {
      state.line.set(request.waiter.id, { ask: count, lapsesAt: now + request.waiter.ttlMillis })
    } else registration.lapsesAt = now + request.waiter.ttlMillis
    return {
      _tag: "Busy",
      remainingMillis,
      fenceFloor: Math.max(this.hooks.lastFence(key, now), Math.round(now * 1000))
    }
  }

  renew(request: LeaseRequest, now: number): boolean {
    const holder = this.live(request.key, now)?.holders.get(request.token)
    if (holder === undefined) return false
    holder.expiresAt = now + request.leaseMillis
    this.hooks.keepFence(request.key, now)
    return true
  }

  release(request: LeaseRequest, now: number): ReleaseReply {
    const state = this.live(request.key, now)
    if (state === undefined || !state.holders.has(request.token)) {
      return request.fence !== undefined && this.hooks.lastFence(request.key, now) === request.fence ? "gone" : false
    }
    this.drop(state, request.token)
    this.serve(request.key, state, now)
    this.live(request.key, now)
    return true
  }

  check(request: LeaseRequest, now: number): boolean {
    return this.live(request.key, now)?.holders.has(request.token) === true
  }

  leave(key: string, waiterId: string, now: number): void {
    const state = this.live(key, now)
    if (state === undefined) return
    let removed = state.line.delete(waiterId)
    const reserved = state.reserved.get(waiterId)
    if (reserved !== undefined) {
      removed = true
      this.drop(state, reserved)
    }
    if (removed) this.serve(key, state, now)
    this.live(key, now)
  }
}
