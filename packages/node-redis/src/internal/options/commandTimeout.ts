// The `timeoutMillis` option of the admin functions and fenced writes: one command's time limit.
import * as Effect from "effect/Effect"
import { InvalidArgument } from "@sage/lock/LockError"
import { valueText } from "./valueText.ts"

/**
 * `timeoutMillis` as given, or `defaultMillis` when absent; anything but a positive, finite number
 * of milliseconds is `InvalidArgument` (NaN or Infinity would leave the command unbounded, zero or
 * less give up before it is sent).
 */
export const commandTimeout = (
  timeoutMillis: unknown,
  defaultMillis: number
): Effect.Effect<number, InvalidArgument> =>
  timeoutMillis === undefined
    ? Effect.succeed(defaultMillis)
    : typeof timeoutMillis === "number" && Number.isFinite(timeoutMillis) && timeoutMillis > 0
      ? Effect.succeed(timeoutMillis)
      : Effect.fail(
          new InvalidArgument({
            field: "timeoutMillis",
            value: valueText(timeoutMillis),
            reason: "must be a positive, finite number of milliseconds"
          })
        )
