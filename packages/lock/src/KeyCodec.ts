/**
 * How a lock key of any type becomes the text stored in Redis.
 *
 * Every process that protects the same resource must use the same namespace and a codec that maps
 * equal keys to equal text; that is all a codec promises. The text is then escaped and wrapped in a
 * cluster hash tag by the lock itself, so a codec never has to care about `{`, `}` or `:`.
 *
 * Codecs reject keys they cannot encode faithfully (an empty key, a string with lone surrogates, a
 * non-integer number) with a reason, which the lock reports as `InvalidArgument` for that call.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"

/**
 * @category type IDs
 * @since 0.1.0
 */
export const TypeId: TypeId = "~@sage/lock/KeyCodec"

/**
 * @category type IDs
 * @since 0.1.0
 */
export type TypeId = "~@sage/lock/KeyCodec"

/**
 * A codec from keys of type `K` to their canonical text.
 *
 * @category models
 * @since 0.1.0
 */
export interface KeyCodec<in K> {
  readonly [TypeId]: TypeId
  /** A short name used in error messages, e.g. `"string"`. */
  readonly name: string
  /** The canonical text of a key, or the reason it cannot be encoded. */
  readonly encode: (key: K) => Result.Result<string, string>
}

/**
 * Builds a codec from a function that returns the canonical text, or fails with a reason.
 *
 * **Details**
 * The text is checked before any codec's result is used: it must be a non-empty, well-formed
 * string. An empty text would leave the Cluster hash tag empty, and a string with lone surrogates
 * has no faithful UTF-8 form (the server would store U+FFFD, so distinct keys would meet), so
 * both are rejected with a reason, which the lock reports as `InvalidArgument` on `key`.
 *
 * @example
 * ```ts
 * import { Result } from "effect"
 * import { KeyCodec } from "@sage/lock"
 *
 * const tenantJob = KeyCodec.make<{ tenant: string; job: string }>("tenant-job", (k) =>
 *   Result.succeed(`${k.tenant.length}:${k.tenant}/${k.job}`))
 * ```
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <K>(name: string, encode: (key: K) => Result.Result<string, string>): KeyCodec<K> => ({
  [TypeId]: TypeId,
  name,
  encode: (key) => {
    const result: unknown = encode(key)
    return Result.isResult(result)
      ? Result.flatMap(result as Result.Result<string, string>, checkText)
      : Result.fail(`the ${name} codec returned ${typeof result}, not a Result (wrap the text in Result.succeed)`)
  }
})

// `String.prototype.isWellFormed` without its ES2024 typings: with the `u` flag a surrogate pair is
// one code point, so only lone surrogates match.
const loneSurrogate = /\p{Surrogate}/u

/** What every codec's text must be: a non-empty string with a faithful UTF-8 form. */
const checkText = (text: unknown): Result.Result<string, string> =>
  typeof text !== "string"
    ? Result.fail(`the codec returned ${typeof text}, not a string`)
    : !loneSurrogate.test(text)
      ? nonEmpty(text)
      : Result.fail("the encoded key contains lone surrogates and has no faithful UTF-8 form")

const nonEmpty = (text: string): Result.Result<string, string> =>
  text.length === 0 ? Result.fail("a lock key must not be empty") : Result.succeed(text)

/**
 * The default codec: the string itself. Rejects the empty string and strings that are not well
 * formed UTF-16 (lone surrogates), which UTF-8 could not store faithfully.
 *
 * @category codecs
 * @since 0.1.0
 */
export const string: KeyCodec<string> = make("string", (key) =>
  typeof key !== "string"
    ? Result.fail(`expected a string, got ${typeof key}`)
    : !loneSurrogate.test(key)
      ? nonEmpty(key)
      : Result.fail("the string contains lone surrogates and has no faithful UTF-8 form")
)

/**
 * Integers (`number` or `bigint`) as canonical decimal text, so `42`, `42n` and `42.0` are one key.
 * Rejects fractions, NaN, infinities and unsafe integers (which would round to a neighbour).
 *
 * @category codecs
 * @since 0.1.0
 */
export const integer: KeyCodec<number | bigint> = make("integer", (key) => {
  if (typeof key === "bigint") return Result.succeed(key.toString())
  if (typeof key !== "number") return Result.fail(`expected a number or bigint, got ${typeof key}`)
  if (!Number.isSafeInteger(key)) return Result.fail("expected a safe integer")
  return Result.succeed(Object.is(key, -0) ? "0" : key.toString())
})

const hex = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"))

/**
 * Raw bytes as lowercase hexadecimal, so any byte sequence (including invalid UTF-8) is a distinct,
 * printable key. Rejects empty arrays.
 *
 * @category codecs
 * @since 0.1.0
 */
export const bytes: KeyCodec<Uint8Array> = make("bytes", (key) => {
  if (!(key instanceof Uint8Array)) return Result.fail("expected a Uint8Array")
  let text = ""
  for (const byte of key) text += hex[byte]
  return nonEmpty(text)
})

/**
 * Any value described by an Effect `Schema`, encoded to its JSON form and printed canonically
 * (object keys sorted), so two equal values always give the same key whatever their property order.
 *
 * **Gotchas**
 * Changing the schema's encoded form changes the keys: all processes must deploy the same schema.
 * The encoded form must be JSON data: with a schema that passes values through (`Schema.Any`), a key
 * holding a `Date`, `Map`, class instance, `NaN` or function is refused (JSON would print all Dates
 * alike); give such a field a schema that encodes it (`Schema.Date` encodes a Date as text).
 *
 * @example
 * ```ts
 * import { Schema } from "effect"
 * import { KeyCodec, Lock } from "@sage/lock"
 *
 * const AccountKey = Schema.Struct({ bank: Schema.String, account: Schema.Number })
 * const accounts = Lock.make({ keyCodec: KeyCodec.schema(AccountKey) })
 * ```
 *
 * @category codecs
 * @since 0.1.0
 */
export const schema = <S extends Schema.Top & { readonly EncodingServices: never }>(self: S): KeyCodec<S["Type"]> => {
  const encode = Schema.encodeUnknownResult(Schema.toCodecJson(self))
  return make("schema", (key) =>
    Result.match(encode(key), {
      onFailure: (error) => Result.fail(`the key does not match the schema: ${error.message}`),
      onSuccess: (json) =>
        Result.flatMap(
          Result.mapError(canonicalJson(json, false), (reason) => `the key's JSON form cannot be printed: ${reason}`),
          nonEmpty
        )
    })
  )
}

// JSON text of a schema's encoded form, object keys sorted, or why the value is not JSON data. A
// schema's JSON codec only produces JSON data; `Schema.Any` passes values through as they are, and
// JSON would print every Date, Map and NaN alike ("{}", "{}", "null"), so that unrelated keys would
// share one lock. Those are refused. An `undefined` inside an object or array prints as `null`, as
// it always has (an optional field given `undefined`): changing that would change existing keys.
const canonicalJson = (value: unknown, inside: boolean): Result.Result<string, string> => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return Result.succeed(JSON.stringify(value))
    case "number":
      return Number.isFinite(value)
        ? Result.succeed(JSON.stringify(value))
        : Result.fail(`${value} is not JSON data; give the key a schema that encodes it`)
    case "undefined":
      return inside ? Result.succeed("null") : Result.fail("undefined is not JSON data")
    case "object": {
      if (value === null) return Result.succeed("null")
      const parts: Array<string> = []
      if (Array.isArray(value)) {
        for (const element of value) {
          const text = canonicalJson(element, true)
          if (Result.isFailure(text)) return text
          parts.push(text.success)
        }
        return Result.succeed(`[${parts.join(",")}]`)
      }
      const prototype: unknown = Object.getPrototypeOf(value)
      if (prototype !== Object.prototype && prototype !== null) {
        const name = (value as { constructor?: { name?: unknown } }).constructor?.name
        return Result.fail(
          `a ${typeof name === "string" && name !== "" ? name : "class instance"} is not JSON data; ` +
            "give the key a schema that encodes it (Schema.Date encodes a Date as text)"
        )
      }
      for (const k of Object.keys(value).sort()) {
        const text = canonicalJson((value as Record<string, unknown>)[k], true)
        if (Result.isFailure(text)) return text
        parts.push(`${JSON.stringify(k)}:${text.success}`)
      }
      return Result.succeed(`{${parts.join(",")}}`)
    }
    default:
      return Result.fail(`a ${typeof value} is not JSON data; give the key a schema that encodes it`)
  }
}
