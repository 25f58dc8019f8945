// The wake-ups of `MemoryBackend`: one mailbox per waiter and key, in place of a server's channel.
// A message that finds nobody waiting is kept, and counts as a wake-up when its waiter next waits
// (a server's message can likewise arrive between two waits of one subscriber).
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { Next } from "../LockBackend.ts"

/** The wake-ups of one waiter on one key: fibers waiting for one, or one sent while none waited. */
interface Mailbox {
  readonly waiting: Set<Deferred.Deferred<true | Next>>
  woken: boolean
}

const nameOf = (key: string, waiterId: string): string => `${key}\u0000${waiterId}`

export class Mailboxes {
  private readonly boxes = new Map<string, Mailbox>()

  /** Waits for a message to `waiterId` on `key`, at most `millis` (then `false`). */
  await(key: string, waiterId: string, millis: number): Effect.Effect<boolean | Next> {
    return Effect.suspend(() => {
      const name = nameOf(key, waiterId)
      let mailbox = this.boxes.get(name)
      if (mailbox?.woken === true) {
        mailbox.woken = false
        return Effect.succeed(true)
      }
      if (mailbox === undefined) {
        mailbox = { waiting: new Set(), woken: false }
        this.boxes.set(name, mailbox)
      }
      const waiting = Deferred.makeUnsafe<true | Next>()
      const box = mailbox
      box.waiting.add(waiting)
      return Deferred.await(waiting).pipe(
        Effect.timeoutOption(millis),
        Effect.map(Option.getOrElse((): boolean | Next => false)),
        Effect.ensuring(Effect.sync(() => box.waiting.delete(waiting)))
      )
    })
  }

  /** Sends `message` to `waiterId` on `key`: to the fibers waiting, or kept for its next wait. */
  wake(key: string, waiterId: string, message: true | Next): void {
    const name = nameOf(key, waiterId)
    const mailbox = this.boxes.get(name)
    if (mailbox === undefined || mailbox.waiting.size === 0) {
      this.boxes.set(name, { waiting: new Set(), woken: true })
      return
    }
    // Taken out first: a fiber resumed here may wait again at once, on this same mailbox.
    const waiting = [...mailbox.waiting]
    mailbox.waiting.clear()
    for (const deferred of waiting) Deferred.doneUnsafe(deferred, Exit.succeed(message))
  }

  /** Forgets `waiterId`'s mailbox on `key` (it left the line, or its registration lapsed). */
  drop(key: string, waiterId: string): void {
    this.boxes.delete(nameOf(key, waiterId))
  }
}
