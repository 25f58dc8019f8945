// A lock call's key, from the caller's value to the Redis key: the client's codec, checked (a codec
// not built with `KeyCodec.make` may throw or answer anything), then the namespace and hash tag.
import * as Result from "effect/Result"
import type * as KeyCodec from "../KeyCodec.ts"
import type { InvalidArgument } from "../LockError.ts"
import { lockKey } from "./keys.ts"
import { invalid, render } from "./settings.ts"

/** The Redis key of a lock, or `InvalidArgument` when the codec rejects (or throws on) the key. */
export const encodeKey = <K>(
  codec: KeyCodec.KeyCodec<K>,
  namespace: string,
  key: K
): Result.Result<string, InvalidArgument> => {
  let encoded: Result.Result<string, string>
  try {
    encoded = codec.encode(key)
  } catch (cause) {
    return Result.fail(invalid("key", key, `the ${codec.name} codec threw: ${render(cause)}`))
  }
  // A codec not built with `KeyCodec.make` (plain JavaScript, a cast) may answer anything.
  if (!Result.isResult(encoded)) {
    return Result.fail(invalid("key", key, `the ${codec.name} codec returned ${render(encoded)}, not a Result`))
  }
  if (Result.isFailure(encoded)) {
    const reason = encoded.failure
    return Result.fail(invalid("key", key, typeof reason === "string" ? reason : render(reason)))
  }
  const text = encoded.success
  return typeof text === "string" && text.length > 0
    ? Result.succeed(lockKey(namespace, text))
    : Result.fail(invalid("key", key, `the ${codec.name} codec encoded it as ${render(text)}, not a non-empty string`))
}
