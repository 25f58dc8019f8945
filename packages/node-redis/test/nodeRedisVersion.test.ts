// Which node-redis the suite runs on. vitest.config.ts runs part of this suite a second time on the
// oldest node-redis the peer range accepts, in place of the workspace's; this checks that the code
// under test really loads the version its project names, so neither run can claim the other's.
import { assert, describe, it } from "@effect/vitest"
import redisPackage from "redis/package.json" with { type: "json" }

describe("node-redis under test", () => {
  it("is the version the project names", () => {
    const expected = process.env["SAGE_EXPECTED_NODE_REDIS"]
    assert.isString(expected, "the project sets SAGE_EXPECTED_NODE_REDIS")
    assert.strictEqual(redisPackage.version, expected)
  })
})
