import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as KeyCodec from "../src/KeyCodec.ts"
import { lockKey } from "../src/internal/keys.ts"

const ok = <K>(codec: KeyCodec.KeyCodec<K>, key: K): string => {
  const result = codec.encode(key)
  assert.isTrue(Result.isSuccess(result), `${codec.name} should encode ${String(key)}`)
  return Result.isSuccess(result) ? result.success : ""
}

const rejected = <K>(codec: KeyCodec.KeyCodec<K>, key: K): string => {
  const result = codec.encode(key)
  assert.isTrue(Result.isFailure(result), `${codec.name} should reject ${String(key)}`)
  return Result.isFailure(result) ? result.failure : ""
}

/** The Cluster hash tag of a key, as the server computes it (null when the whole key is hashed). */
const hashTag = (key: string): string | null => {
  const open = key.indexOf("{")
  if (open === -1) return null
  const close = key.indexOf("}", open + 1)
  if (close === -1 || close === open + 1) return null
  return key.slice(open + 1, close)
}

describe("KeyCodec", () => {
  it("string: the text itself; empty and lone surrogates rejected", () => {
    assert.strictEqual(ok(KeyCodec.string, "account:42"), "account:42")
    assert.strictEqual(ok(KeyCodec.string, "ünï 🔒"), "ünï 🔒")
    assert.include(rejected(KeyCodec.string, ""), "empty")
    assert.include(rejected(KeyCodec.string, "a\ud800b"), "surrogate")
  })

  it("integer: one canonical text for equal integers", () => {
    assert.strictEqual(ok(KeyCodec.integer, 42), "42")
    assert.strictEqual(ok(KeyCodec.integer, 42n), "42")
    assert.strictEqual(ok(KeyCodec.integer, -0), "0")
    assert.strictEqual(ok(KeyCodec.integer, 2n ** 80n), "1208925819614629174706176")
    for (const bad of [1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) rejected(KeyCodec.integer, bad)
  })

  it("bytes: lowercase hex, any byte value", () => {
    assert.strictEqual(ok(KeyCodec.bytes, new Uint8Array([0, 0x7b, 0x7d, 0xff])), "007b7dff")
    rejected(KeyCodec.bytes, new Uint8Array([]))
  })

  it("schema: canonical JSON, independent of property order", () => {
    const Key = Schema.Struct({ bank: Schema.String, account: Schema.Number, tags: Schema.Array(Schema.String) })
    const codec = KeyCodec.schema(Key)
    const a = ok(codec, { bank: "b", account: 1, tags: ["x"] })
    const b = ok(codec, { tags: ["x"], account: 1, bank: "b" })
    assert.strictEqual(a, b)
    assert.strictEqual(a, '{"account":1,"bank":"b","tags":["x"]}')
    const Record = KeyCodec.schema(Schema.Record(Schema.String, Schema.Number))
    assert.strictEqual(ok(Record, { z: 1, a: 2 }), ok(Record, { a: 2, z: 1 }))
    assert.include(rejected(codec, { bank: 1 } as never), "schema")
  })

  it("schema: values JSON cannot print faithfully are refused, not printed alike", () => {
    // Schema.Any passes values through unencoded: JSON would print every Date and Map as "{}" and
    // NaN, functions and undefined as "null", so unrelated keys would share one lock.
    const any = KeyCodec.schema(Schema.Any)
    assert.include(rejected(any, new Date(0)), "Date")
    assert.include(rejected(any, new Map([[1, 2]])), "Map")
    assert.include(rejected(any, { at: new Date(1) }), "Date")
    assert.include(rejected(any, [Number.NaN]), "NaN")
    assert.include(rejected(any, Number.POSITIVE_INFINITY), "Infinity")
    assert.include(
      rejected(any, () => 1),
      "function"
    )
    assert.include(rejected(any, Symbol("k")), "symbol")
    assert.include(rejected(any, 1n), "bigint")
    assert.include(rejected(any, undefined), "undefined")
    // JSON data is printed as before: these texts are existing keys and must not change.
    assert.strictEqual(ok(any, null), "null")
    assert.strictEqual(
      ok(any, { b: [1, "x", true, null], a: { d: 2, c: 1 } }),
      '{"a":{"c":1,"d":2},"b":[1,"x",true,null]}'
    )
    const bare: Record<string, number> = Object.assign(Object.create(null), { k: 1 })
    assert.deepStrictEqual(any.encode(bare), Result.succeed('{"k":1}'), "an object without a prototype is data")
    const Optional = KeyCodec.schema(Schema.Struct({ a: Schema.optional(Schema.Number) }))
    assert.strictEqual(ok(Optional, { a: undefined }), '{"a":null}')
    assert.strictEqual(ok(Optional, {}), "{}")
    // A schema that encodes a Date gives each one its own key.
    const dated = KeyCodec.schema(Schema.Date)
    assert.notStrictEqual(ok(dated, new Date(0)), ok(dated, new Date(1)))
  })

  it("make: a custom codec's text is checked (empty, lone surrogates, not a string)", () => {
    const raw = KeyCodec.make<unknown>("raw", (key) => Result.succeed(key as string))
    assert.strictEqual(ok(raw, "a"), "a")
    assert.include(rejected(raw, ""), "empty")
    assert.include(rejected(raw, "\uD800"), "surrogate")
    assert.include(rejected(raw, "x\uDBFFy"), "surrogate")
    assert.include(rejected(raw, 42), "string")
    // From plain JavaScript, a function that returns the text itself instead of a Result.
    const plain = KeyCodec.make<string>("plain", (key) => key as never)
    assert.include(rejected(plain, "a"), "not a Result")
  })
})

describe("lock keys", () => {
  it("every key gets a non-empty hash tag equal to its escaped text, for any text", () => {
    const texts = ["{", "}", "{}", "}{", "a}b", "%7B", "x{y}z", ":", " ", "ünï", "%"]
    const seen = new Set<string>()
    for (const text of texts) {
      const key = lockKey("ns", text)
      const tag = hashTag(key)
      assert.isNotNull(tag, key)
      assert.notInclude(tag ?? "", "{")
      assert.notInclude(tag ?? "", "}")
      assert.strictEqual(hashTag(`${key}:fence`), tag, "companion keys share the slot")
      seen.add(key)
    }
    assert.strictEqual(seen.size, texts.length, "escaping is one-to-one")
    assert.strictEqual(lockKey("ns", "a{b}%"), "ns:{a%7Bb%7D%25}")
  })

  it("lone surrogates that reach the key format are escaped, so they never meet as U+FFFD", () => {
    const keys = ["\uD800", "\uDBFF", "\uFFFD", "%uD800"].map((text) => lockKey("ns", text))
    assert.strictEqual(new Set(keys).size, keys.length)
    for (const key of keys) assert.isTrue(key.isWellFormed(), key)
    assert.strictEqual(lockKey("ns", "a\u{1F600}b"), "ns:{a\u{1F600}b}", "a surrogate pair is text, kept as is")
    assert.strictEqual(lockKey("ns", "plain:key-1"), "ns:{plain:key-1}")
  })
})
