// Closing a client the lock opened: `QUIT` (its queued commands go out first) within a second, then
// the socket is dropped whatever happened, so nothing keeps the process alive.
import * as Effect from "effect/Effect"
import type { Redis } from "ioredis"

export const close = (client: Pick<Redis, "quit" | "disconnect" | "status">): Effect.Effect<void> =>
  client.status === "end"
    ? Effect.void
    : Effect.promise(() => client.quit().catch(() => undefined)).pipe(
        Effect.timeoutOption(1_000),
        Effect.ensuring(Effect.sync(() => client.disconnect())),
        Effect.asVoid
      )
