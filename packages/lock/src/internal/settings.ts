// Options are validated and normalised once, when a lock client is made; per-call arguments
// (`waitTimeout`, the key) are validated on each call. Every rejection names the field and value.
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as KeyCodec from "../KeyCodec.ts"
import { InvalidArgument } from "../LockError.ts"

/** The smallest lease accepted: below it, one round trip can eat the whole lease. */
export const minimumLeaseMillis = 30

export const defaultLeaseMillis = 30_000
export const defaultNamespace = "lock"

/** The longest a release may take before it is abandoned (the lease frees the key anyway). */
export const releaseTimeoutMillis = 1_000

/** `tryWithLock` retries temporary failures for about this long (bounded by the usable lease). */
export const tryBudgetMillis = 1_000

export interface Settings {
  readonly leaseMillis: number
  readonly namespace: string
  readonly replicaAcknowledgement: boolean
  /** Renew this long after the last successful request was sent. */
  readonly renewEveryMillis: number
  /** The part of the lease the client relies on: lease minus a safety margin. */
  readonly usableLeaseMillis: number
}

/** Any value as text for an error message; never throws, whatever the value's `toString` does. */
export const render = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  // JSON would show NaN and the infinities as null.
  if (typeof value === "number") return String(value)
  if (typeof value === "bigint") return `${value}n`
  // JSON would show an error as {}.
  if (value instanceof Error) return `${value.name}: ${value.message}`
  if (Duration.isDuration(value)) return Duration.format(value)
  try {
    const json = JSON.stringify(value)
    if (json !== undefined) return json
  } catch {
    // A cycle, a bigint inside, a throwing toJSON: fall through.
  }
  try {
    return String(value)
  } catch {
    return Object.prototype.toString.call(value)
  }
}

export const invalid = (field: string, value: unknown, reason: string): InvalidArgument =>
  new InvalidArgument({ field, value: render(value), reason })

/** A finite, positive duration in milliseconds, or `InvalidArgument` naming the field. */
export const positiveMillisResult = (field: string, input: unknown): Result.Result<number, InvalidArgument> => {
  // The common per-call forms, without building a Duration.
  if (typeof input === "number" && input > 0 && input < Infinity) return Result.succeed(input)
  if (typeof input === "string" && input === lastText) return Result.succeed(lastTextMillis)
  if (input === undefined) {
    return Result.fail(invalid(field, input, 'is required (a number of milliseconds or "2 seconds")'))
  }
  if (typeof input === "number" && Number.isNaN(input)) {
    return Result.fail(invalid(field, input, "NaN is not a duration"))
  }
  let decoded: Option.Option<Duration.Duration>
  try {
    decoded = Duration.fromInput(input as Duration.Input)
  } catch {
    decoded = Option.none()
  }
  if (Option.isNone(decoded)) {
    return Result.fail(invalid(field, input, 'not a duration (try a number of milliseconds or "2 seconds")'))
  }
  const duration = decoded.value
  if (!Duration.isFinite(duration)) return Result.fail(invalid(field, input, "must be finite"))
  if (!Duration.isPositive(duration)) return Result.fail(invalid(field, input, "must be positive"))
  const millis = Duration.toMillis(duration)
  if (typeof input === "string") {
    lastText = input
    lastTextMillis = millis
  }
  return Result.succeed(millis)
}

// The last valid duration text seen: a call site passes the same "5 seconds" every time.
let lastText: string | undefined
let lastTextMillis = 0

/** `positiveMillisResult` as an Effect. */
export const positiveMillis = (field: string, input: unknown): Effect.Effect<number, InvalidArgument> => {
  const result = positiveMillisResult(field, input)
  return Result.isSuccess(result) ? Effect.succeed(result.success) : Effect.fail(result.failure)
}

/** The safety margin kept off the lease: 2 ms plus 5%, covering clock-rate drift and scheduling. */
export const safetyMarginMillis = (leaseMillis: number): number => 2 + leaseMillis * 0.05

/** The part of a lease the client relies on, in whole milliseconds. */
export const usableLeaseMillis = (leaseMillis: number): number =>
  Math.floor(leaseMillis - safetyMarginMillis(leaseMillis))

/** The client's options object: `undefined` (the defaults) or an object. */
export const checkOptions = (options: unknown): Effect.Effect<void, InvalidArgument> =>
  options === undefined || (typeof options === "object" && options !== null && !Array.isArray(options))
    ? Effect.void
    : Effect.fail(invalid("options", options, "must be an options object"))

/**
 * The key codec a client will use, read once: its name and encode function must be what a
 * `KeyCodec` has (a codec built in plain JavaScript, or cast, may not be one). The codec returned
 * reads neither again, so a getter that throws later cannot reach a call.
 */
export const checkKeyCodec = <K>(
  codec: KeyCodec.KeyCodec<K> | undefined,
  fallback: KeyCodec.KeyCodec<K>
): Effect.Effect<KeyCodec.KeyCodec<K>, InvalidArgument> => {
  if (codec === undefined) return Effect.succeed(fallback)
  let name: unknown
  let encode: unknown
  try {
    name = codec.name
    encode = codec.encode
  } catch (cause) {
    return Effect.fail(invalid("keyCodec", cause, "reading its name or encode threw"))
  }
  if (typeof name !== "string" || typeof encode !== "function") {
    return Effect.fail(invalid("keyCodec", codec, "must be a KeyCodec (build one with KeyCodec.make)"))
  }
  if (Object.getOwnPropertyDescriptor(codec, "name")?.value === name && codec.encode === encode) {
    return Effect.succeed(codec)
  }
  const call = encode as KeyCodec.KeyCodec<K>["encode"]
  return Effect.succeed({ ...codec, name, encode: (key: K) => call.call(codec, key) })
}

export interface SettingsInput {
  readonly leaseDuration?: Duration.Input | undefined
  readonly namespace?: string | undefined
  readonly replicaAcknowledgement?: boolean | undefined
}

export const makeSettings = Effect.fnUntraced(function* (options: SettingsInput) {
  const leaseMillis =
    options.leaseDuration === undefined
      ? defaultLeaseMillis
      : Math.ceil(yield* positiveMillis("leaseDuration", options.leaseDuration))
  if (leaseMillis < minimumLeaseMillis) {
    return yield* invalid("leaseDuration", options.leaseDuration, `must be at least ${minimumLeaseMillis} ms`)
  }
  // Beyond this, milliseconds are no longer whole numbers in JavaScript or Lua, and a server asked
  // for such an expiry answers an error at the first acquisition rather than here.
  if (leaseMillis > Number.MAX_SAFE_INTEGER) {
    return yield* invalid("leaseDuration", options.leaseDuration, "must be at most 2^53 - 1 ms (about 285,000 years)")
  }
  const namespace = options.namespace ?? defaultNamespace
  if (typeof namespace !== "string" || namespace.length === 0) {
    return yield* invalid("namespace", namespace, "must be a non-empty string")
  }
  if (/[{}]/.test(namespace)) {
    return yield* invalid("namespace", namespace, "must not contain '{' or '}' (they would change the hash tag)")
  }
  // `isWellFormed` (ES2024) without its typings: under `u` only a lone surrogate matches.
  if (/\p{Surrogate}/u.test(namespace)) {
    return yield* invalid("namespace", namespace, "contains lone surrogates")
  }
  const replicaAcknowledgement = options.replicaAcknowledgement ?? true
  if (typeof replicaAcknowledgement !== "boolean") {
    return yield* invalid("replicaAcknowledgement", replicaAcknowledgement, "must be a boolean")
  }
  return {
    leaseMillis,
    namespace,
    replicaAcknowledgement,
    renewEveryMillis: Math.floor(leaseMillis / 3),
    usableLeaseMillis: usableLeaseMillis(leaseMillis)
  } satisfies Settings
})
