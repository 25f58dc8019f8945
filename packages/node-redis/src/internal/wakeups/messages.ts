// The messages a release publishes on a waiter's channel, read: a plain wake-up, a grant of the lock,
// or word that the waiter ahead was served.
import type { Granted, Next } from "@sage/lock/LockBackend"

/** What a message tells the waiter it names: a grant, that the waiter ahead was served, or a wake-up. */
export type Message = Granted | Next | undefined

/** The suffix of a message telling a waiter that the one ahead of it was served: `<id>:next:<claim ms>`. */
const nextMarker = ":next:"

/**
 * A message read: `<waiter id>` wakes that waiter; `<waiter id>:<fence>:<claim ms>` hands it the lock
 * (`Granted`); `<waiter id>:next:<claim ms>` tells it the waiter ahead was served (`Next`).
 */
export const messageOf = (text: string): { readonly waiterId: string; readonly message: Message } => {
  const end = text.lastIndexOf(":")
  const start = end > 0 ? text.lastIndexOf(":", end - 1) : -1
  if (start <= 0) return { waiterId: text, message: undefined }
  const claimMillis = Number(text.slice(end + 1))
  if (!Number.isSafeInteger(claimMillis) || claimMillis <= 0) return { waiterId: text, message: undefined }
  const waiterId = text.slice(0, start)
  if (text.startsWith(nextMarker, start)) return { waiterId, message: { _tag: "Next", claimMillis } }
  const fence = Number(text.slice(start + 1, end))
  if (!Number.isSafeInteger(fence) || fence <= 0) return { waiterId: text, message: undefined }
  return {
    waiterId,
    message: { _tag: "Granted", token: text.slice(0, end), fence, leaseMillis: claimMillis }
  }
}
