// Sending commands and the lock scripts within a time limit over node-redis connections: the
// client-agnostic steps of sending.ts with node-redis's failures read by classify.ts.
import type * as Effect from "effect/Effect"
import type * as Result from "effect/Result"
import type { LockRedisError } from "@sage/lock/LockError"
import { classify } from "./classify.ts"
import * as Sending from "./sending.ts"

export {
  type CommandClient,
  noReply,
  type Parse,
  runScript,
  type ScriptCall,
  scriptsOver,
  type Send
} from "./sending.ts"

/** `Sending.sendWithin` over a node-redis connection. */
export const sendWithin = (
  client: Sending.CommandClient,
  args: Array<string>,
  timeoutMillis: number
): Effect.Effect<unknown, LockRedisError> => Sending.sendWithin(client, args, timeoutMillis, classify)

/** `Sending.sendOver` for a node-redis connection: single commands, and scripts in one step. */
export const sendOver = (client: Sending.CommandClient): Sending.Send => Sending.sendOver(client, classify)

/** `Sending.sendAllWithin` over a node-redis connection. */
export const sendAllWithin = (
  client: Sending.CommandClient,
  commands: ReadonlyArray<ReadonlyArray<string>>,
  timeoutMillis: number
): Effect.Effect<Array<Result.Result<unknown, LockRedisError>>> =>
  Sending.sendAllWithin(client, commands, timeoutMillis, classify)
