// What the lock needs of the node-redis clients it is given or opens itself (standalone ones, and
// their duplicates that subscribe), and how its own clients reconnect.
import type { CommandClient } from "./commands.ts"

/** What the lock needs of a client's duplicate, which it owns and uses as the wake-up subscriber. */
export interface SubscriberClient {
  on(event: "error", listener: (error: unknown) => void): unknown
  on(event: "connect" | "reconnecting", listener: () => void): unknown
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
  close(): Promise<unknown>
  destroy(): void
  unref(): void
  readonly isOpen: boolean
  readonly isReady: boolean
  sendCommand(args: Array<string>, options?: { readonly timeout?: number }): Promise<unknown>
}

/** What the lock needs of a connected client it shares: commands, and a duplicate to subscribe with. */
export interface SharedClient extends CommandClient {
  duplicate(): SubscriberClient
}

/** 20 ms doubling up to 500 ms, plus up to 50 ms of jitter: a lock cannot wait seconds to reconnect. */
export const defaultReconnect = (retries: number): number =>
  Math.min(20 * 2 ** retries, 500) + Math.floor(Math.random() * 50)
