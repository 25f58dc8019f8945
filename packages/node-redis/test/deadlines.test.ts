// The shared timer behind every lock command's time limit (src/internal/connection/deadlines.ts), on Node's
// real timers. Limits are short and the margins wide: what is checked is order and "never early",
// which do not depend on how busy the machine is.
import { assert, describe, it } from "@effect/vitest"
import * as Deadlines from "../src/internal/connection/deadlines.ts"

const sleep = (millis: number) => new Promise<void>((resolve) => setTimeout(resolve, millis))

/** Resolves with the time from now until `expire` runs. */
const timed = (millis: number): { readonly expired: Promise<number>; readonly deadline: Deadlines.Deadline } => {
  const start = performance.now()
  let deadline!: Deadlines.Deadline
  const expired = new Promise<number>((resolve) => {
    deadline = Deadlines.after(millis, () => resolve(performance.now() - start))
  })
  return { expired, deadline }
}

describe("Deadlines", () => {
  it("expires a limit once it has passed, never before", async () => {
    const elapsed = await timed(40).expired
    assert.isAtLeast(elapsed, 40)
    assert.strictEqual(Deadlines.waiting(), 0)
  })

  it("never expires a cancelled limit, and forgets it", async () => {
    let expired = false
    const deadline = Deadlines.after(20, () => {
      expired = true
    })
    assert.strictEqual(Deadlines.waiting(), 1)
    Deadlines.cancel(deadline)
    Deadlines.cancel(deadline)
    assert.strictEqual(Deadlines.waiting(), 0)
    await sleep(120)
    assert.isFalse(expired)
  })

  it("expires a shorter limit set after a longer one first, and the longer one later", async () => {
    // The timer was armed for the longer limit: the shorter one must re-arm it, or it would wait
    // for the longer one (the 1.5 s bound leaves the machine well over a second of slack).
    const long = timed(2000)
    const short = timed(20)
    const shortElapsed = await short.expired
    assert.isAtLeast(shortElapsed, 20)
    assert.isBelow(shortElapsed, 1500)
    assert.strictEqual(Deadlines.waiting(), 1)
    assert.isAtLeast(await long.expired, 2000)
    assert.strictEqual(Deadlines.waiting(), 0)
  })

  it("keeps the other limits when some expire or are cancelled, and expires each at its own time", async () => {
    const limits = [60, 10, 30, 200, 30, 45]
    const start = performance.now()
    const expired = new Map<number, number>()
    const set = limits.map((millis, i) => Deadlines.after(millis, () => expired.set(i, performance.now() - start)))
    Deadlines.cancel(set[2]!)
    Deadlines.cancel(set[3]!)
    await sleep(300)
    assert.deepStrictEqual([...expired.keys()].toSorted(), [0, 1, 4, 5])
    for (const [i, elapsed] of expired) assert.isAtLeast(elapsed, limits[i]!, `limit ${i} expired early`)
    assert.strictEqual(Deadlines.waiting(), 0)
  })

  it("lets an expiry set a new limit, which expires in turn", async () => {
    const second = new Promise<void>((resolve) => {
      Deadlines.after(10, () => {
        Deadlines.after(10, resolve)
      })
    })
    await second
    assert.strictEqual(Deadlines.waiting(), 0)
  })

  it("holds a limit longer than a Node timer can (24.8 days) without expiring it or firing every millisecond", async () => {
    // Node fires a timer whose delay does not fit 32 bits after 1 ms, with a TimeoutOverflowWarning;
    // re-armed for what is left, such a limit used to fire about every millisecond while it waited.
    const overflows: Array<string> = []
    const onWarning = (warning: Error) => {
      if (warning.name === "TimeoutOverflowWarning") overflows.push(warning.message)
    }
    process.on("warning", onWarning)
    try {
      let expired = false
      const long = Deadlines.after(30 * 24 * 3600 * 1000, () => {
        expired = true
      })
      const short = timed(30)
      assert.isAtLeast(await short.expired, 30)
      await sleep(100)
      assert.isFalse(expired)
      assert.strictEqual(Deadlines.waiting(), 1)
      Deadlines.cancel(long)
      assert.deepStrictEqual(overflows, [])
    } finally {
      process.off("warning", onWarning)
    }
  })
})
