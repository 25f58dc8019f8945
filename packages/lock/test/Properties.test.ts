// Property tests (fast-check): key codecs and the key format over any input, option validation over
// any value, and random interleavings of lock calls, interruptions and timeouts on the in-memory
// backend under TestClock, checked against what a lock must guarantee.
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import * as TestClock from "effect/testing/TestClock"
import fc from "fast-check"
import * as KeyCodec from "../src/KeyCodec.ts"
import * as Lock from "../src/Lock.ts"
import { LockBackend } from "../src/LockBackend.ts"
import * as MemoryBackend from "../src/MemoryBackend.ts"
import * as Keys from "../src/internal/keys.ts"

/** The Cluster hash tag of a key: the text between the first `{` and the first `}` after it. */
const hashTag = (key: string): string | undefined => {
  const open = key.indexOf("{")
  const close = key.indexOf("}", open + 1)
  return open === -1 || close === -1 ? undefined : key.slice(open + 1, close)
}

const isIntegerKey = (x: number | bigint): boolean => typeof x === "bigint" || Number.isSafeInteger(x)

const isWellFormed = (text: string): boolean => !/\p{Surrogate}/u.test(text)

/** Any string, lone surrogates included (fast-check's "binary" unit covers every UTF-16 code unit). */
const anyString = fc.string({ unit: "binary", maxLength: 64 })

const encoded = <K>(codec: KeyCodec.KeyCodec<K>, key: K): string | undefined => {
  const result = codec.encode(key)
  return Result.isSuccess(result) ? Keys.lockKey("ns", result.success) : undefined
}

describe("properties: keys", () => {
  it("the string codec accepts exactly the non-empty well-formed strings, one to one", () => {
    fc.assert(
      fc.property(anyString, anyString, (a, b) => {
        const keyA = encoded(KeyCodec.string, a)
        const keyB = encoded(KeyCodec.string, b)
        assert.strictEqual(keyA !== undefined, a.length > 0 && isWellFormed(a), JSON.stringify(a))
        if (keyA !== undefined && keyB !== undefined) assert.strictEqual(keyA === keyB, a === b)
      }),
      { numRuns: 2000 }
    )
  })

  it("the key format is one to one even for text no codec should pass, and keeps one non-empty hash tag", () => {
    fc.assert(
      fc.property(
        anyString.filter((s) => s.length > 0),
        anyString.filter((s) => s.length > 0),
        (a, b) => {
          const keyA = Keys.lockKey("ns", a)
          assert.strictEqual(keyA === Keys.lockKey("ns", b), a === b)
          assert.isTrue(isWellFormed(keyA), "the key has a faithful UTF-8 form")
          const tag = hashTag(keyA)
          assert.isDefined(tag)
          assert.isAbove(tag!.length, 0)
          assert.strictEqual(keyA, `ns:{${tag}}`, "the whole encoded text is the tag")
          for (const companion of [Keys.waitersKey(keyA), Keys.waitingUntilKey(keyA), Keys.wakeChannel(keyA)]) {
            assert.strictEqual(hashTag(companion), tag, "companions share the tag")
          }
        }
      ),
      { numRuns: 2000 }
    )
  })

  it("the bytes codec is one to one on byte strings up to 64 KiB", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 65_536 }), fc.uint8Array({ maxLength: 64 }), (a, b) => {
        const keyA = encoded(KeyCodec.bytes, a)
        const keyB = encoded(KeyCodec.bytes, b)
        assert.strictEqual(keyA !== undefined, a.length > 0)
        const same = a.length === b.length && a.every((byte, i) => byte === b[i])
        if (keyA !== undefined && keyB !== undefined) assert.strictEqual(keyA === keyB, same)
        if (keyA !== undefined) assert.strictEqual(hashTag(keyA)?.length, a.length * 2)
      }),
      { numRuns: 200 }
    )
  })

  it("the integer codec maps equal integers to one key and anything else to a reason, never a throw", () => {
    const integerLike = fc.oneof(
      fc.integer(),
      fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }),
      fc.double(),
      fc.constantFrom(-0, 0.5, Number.MAX_SAFE_INTEGER + 1, Infinity, Number.NaN)
    )
    fc.assert(
      fc.property(integerLike, integerLike, (a, b) => {
        const keyA = encoded(KeyCodec.integer, a)
        const keyB = encoded(KeyCodec.integer, b)
        assert.strictEqual(keyA !== undefined, isIntegerKey(a))
        if (keyA !== undefined && keyB !== undefined) assert.strictEqual(keyA === keyB, BigInt(a) === BigInt(b))
      }),
      { numRuns: 2000 }
    )
  })

  it("a custom codec's text is checked like the built-in ones", () => {
    const passThrough = KeyCodec.make<string>("raw", (key) => Result.succeed(key))
    fc.assert(
      fc.property(anyString, (text) => {
        const key = encoded(passThrough, text)
        assert.strictEqual(key !== undefined, text.length > 0 && isWellFormed(text))
      }),
      { numRuns: 1000 }
    )
  })
})

const makeLock = (options: Record<string, unknown>) =>
  Lock.make(options as Lock.LockOptions<string>).pipe(Effect.provide(MemoryBackend.layer))

/**
 * Fails the property on anything but a success, an `InvalidArgument` naming `field`, or one of the
 * `allowed` typed errors (a positive wait too small to attempt anything in times out).
 */
const successOrInvalid = <A, E>(
  exit: Exit.Exit<A, E>,
  field: string,
  value: unknown,
  allowed: ReadonlyArray<string> = []
): void => {
  if (Exit.isSuccess(exit)) return
  const error = Cause.findErrorOption(exit.cause)
  assert.isTrue(
    error._tag === "Some",
    `${field} = ${fc.stringify(value)}: a defect or interruption, not a typed error: ${Cause.pretty(exit.cause)}`
  )
  const failure = error._tag === "Some" ? (error.value as { _tag?: string; field?: string }) : undefined
  if (failure?._tag !== undefined && allowed.includes(failure._tag)) return
  assert.strictEqual(failure?._tag, "InvalidArgument")
  assert.strictEqual(failure?.field, field)
}

describe("properties: validation", () => {
  it.effect("any value as an option is accepted or an InvalidArgument naming that option", () =>
    Effect.gen(function* () {
      const values = fc.sample(fc.anything({ withBigInt: true, withMap: true, withSet: true }), 300)
      for (const field of ["leaseDuration", "namespace"]) {
        for (const value of values) successOrInvalid(yield* Effect.exit(makeLock({ [field]: value })), field, value)
      }
      for (const value of fc.sample(anyString, 300)) {
        successOrInvalid(yield* Effect.exit(makeLock({ namespace: value })), "namespace", value)
      }
    })
  )

  it.effect("any value as waitTimeout or key is accepted or an InvalidArgument naming it", () =>
    Effect.gen(function* () {
      const lock = yield* makeLock({})
      for (const value of fc.sample(fc.anything({ withBigInt: true }), 300)) {
        const exit = yield* Effect.exit(lock.withLock("k", { waitTimeout: value as never })(Effect.void))
        successOrInvalid(exit, "waitTimeout", value, ["TimedOut"])
        const keyed = yield* Effect.exit(lock.tryWithLock(value as never)(Effect.void))
        successOrInvalid(keyed, "key", value)
      }
    })
  )
})

/** One fiber's script: which key, how long its body runs, and when (if ever) it is interrupted. */
interface Step {
  readonly key: number
  readonly mode: "wait" | "try"
  readonly holdMillis: number
  readonly waitMillis: number
  readonly interruptAfterMillis: number | undefined
}

const step: fc.Arbitrary<Step> = fc.record({
  key: fc.integer({ min: 0, max: 2 }),
  mode: fc.constantFrom("wait" as const, "try" as const),
  holdMillis: fc.integer({ min: 0, max: 3_000 }),
  waitMillis: fc.integer({ min: 1, max: 5_000 }),
  interruptAfterMillis: fc.option(fc.integer({ min: 0, max: 4_000 }), { nil: undefined })
})

describe("properties: interleavings", () => {
  it.effect(
    "random calls, timeouts and interruptions never overlap on a key, never hang, and leave no key held",
    () =>
      Effect.gen(function* () {
        const scenarios = fc.sample(fc.array(fc.array(step, { minLength: 1, maxLength: 4 }), { maxLength: 8 }), 40)
        for (const fibers of scenarios) {
          // Clients share the in-memory backend, like processes sharing a server.
          const backend = yield* MemoryBackend.make
          const clients = yield* Effect.forEach([0, 1], () =>
            Lock.make({ namespace: "p", leaseDuration: "1 second" }).pipe(Effect.provideService(LockBackend, backend))
          )
          const inside = [0, 0, 0]
          let overlaps = 0
          const body = (key: number, holdMillis: number) =>
            Effect.acquireUseRelease(
              Effect.sync(() => {
                if (++inside[key]! > 1) overlaps++
              }),
              () => Effect.sleep(holdMillis),
              () => Effect.sync(() => void inside[key]!--)
            )
          const run = (steps: ReadonlyArray<Step>, index: number) =>
            Effect.forEach(
              steps,
              (s) => {
                const client = clients[index % 2]!
                const call =
                  s.mode === "wait"
                    ? client.withLock(`k${s.key}`, { waitTimeout: s.waitMillis })(body(s.key, s.holdMillis))
                    : client.tryWithLock(`k${s.key}`)(body(s.key, s.holdMillis))
                const bounded =
                  s.interruptAfterMillis === undefined ? call : Effect.timeoutOption(call, s.interruptAfterMillis)
                // Typed failures (TimedOut) are expected outcomes; defects would fail the test.
                return Effect.ignore(bounded)
              },
              { discard: true }
            )
          const all = yield* Effect.forkChild(Effect.forEach(fibers, run, { concurrency: "unbounded", discard: true }))
          // Every call is bounded by its wait, its hold and its release: 60 s of test time ends them all.
          for (let i = 0; i < 120 && all.pollUnsafe() === undefined; i++) yield* TestClock.adjust("500 millis")
          assert.isDefined(all.pollUnsafe(), "every call finished")
          yield* Fiber.join(all)
          assert.strictEqual(overlaps, 0, "no two bodies on one key at once")
          // Nothing is left held: a fresh client gets every key at once.
          const fresh = yield* Lock.make({ namespace: "p" }).pipe(Effect.provideService(LockBackend, backend))
          for (const key of [0, 1, 2]) {
            const got = yield* fresh.tryWithLock(`k${key}`)(Effect.void)
            assert.isTrue(got._tag === "Some", `k${key} is free at the end`)
          }
        }
      }),
    60_000
  )
})
