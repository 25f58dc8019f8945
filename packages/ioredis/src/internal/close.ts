// Closing a client the lock opened: `QUIT` (its queued commands go out first) within a second, then
// the socket is dropped whatever happened, so nothing keeps the process alive.
import * as Effect from "effect/Effect"

/** A `Redis` or a `Cluster`. */
export interface Closable {
  readonly status: string
  quit(): Promise<unknown>
  disconnect(): void
}

export const close = (client: Closable): Effect.Effect<void> =>
  client.status === "end"
    ? Effect.void
    : Effect.promise(() => client.quit().catch(() => undefined)).pipe(
        Effect.timeoutOption(1_000),
        Effect.ensuring(Effect.sync(() => client.disconnect())),
        Effect.asVoid
      )
