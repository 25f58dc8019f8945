import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

// The workspace packages export their built dist/ to the world and their sources under the
// "@sage/source" condition: the tests run against src/, so no build is needed first. The rest is
// Vite's default server condition list ("development|production" picks the mode's condition).
const conditions = ["@sage/source", "module", "node", "development|production"]

const project = (
  name: string,
  root: string,
  extra: {
    readonly maxConcurrency?: number
    readonly sequence?: { readonly groupOrder: number }
    readonly include?: ReadonlyArray<string>
    readonly exclude?: ReadonlyArray<string>
    readonly alias?: Record<string, string>
    readonly env?: Record<string, string>
  } = {}
) => {
  const { include = ["test/**/*.test.ts"], exclude = [], alias, ...rest } = extra
  return {
    resolve: { conditions, ...(alias === undefined ? {} : { alias }) },
    ssr: { resolve: { conditions, externalConditions: ["@sage/source", "node", "module-sync"] } },
    test: {
      name,
      root,
      include: [...include],
      exclude: ["**/node_modules/**", ...exclude],
      testTimeout: 60_000,
      hookTimeout: 60_000,
      ...rest
    }
  }
}

// The backend's peer range starts at an older node-redis than the one the workspace uses (6), so a
// subset of its suite runs again on that oldest version, installed beside it as `redis-oldest` and
// put in place of `redis` for the workspace's sources and tests. The two versions must agree, or the
// run would claim a version it did not test.
const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))
const readJson = (path: string) => JSON.parse(readFileSync(here(path), "utf8"))
const peerFloor = /^>=\s*([0-9.]+)/.exec(readJson("packages/node-redis/package.json").peerDependencies.redis)?.[1]
const oldest = readJson("packages/node-redis/node_modules/redis-oldest/package.json").version
const workspaceNodeRedis = readJson("packages/node-redis/package.json").devDependencies.redis
if (oldest !== peerFloor) {
  throw new Error(`redis-oldest is ${oldest}, but the backend's peer range starts at ${peerFloor}: make them agree`)
}

// Redis 8.0 and Valkey 9.1 have a file of their own in the test kit: a run whose SAGE_TEST_FLAVORS
// names neither does not collect it (toolchain.sh leaves out a server it could not provision).
const requestedFlavors = (process.env["SAGE_TEST_FLAVORS"] ?? "")
  .split(",")
  .map((name) => name.trim())
  .filter((name) => name !== "")
const newerRequested =
  requestedFlavors.length === 0 || requestedFlavors.some((name) => name === "redis8" || name === "valkey9")

const oldestFlavor = (process.env["SAGE_TEST_FLAVORS"] ?? "").split(",")[0]?.trim() || "redis7"

// Vitest 4+ ignores vitest.workspace.ts: the packages are declared here as projects.
export default defineConfig({
  test: {
    // Vitest's default on 2 cores is one worker (cores - 1), which runs the files one after another.
    // The suites mostly wait on servers, failovers and timers, so two files at a time roughly halve
    // the run without starving either (the timing-dependent tests keep generous margins). Three
    // took the suite from about 860 s to 615 s, but one run in six then lost a lock in the contract:
    // a waiter handed the lock by a release has about 300 ms for its first renewal, and a stall of
    // the loaded process over TLS took longer. Two it stays.
    maxWorkers: 2,
    projects: [
      project("lock", "packages/lock"),
      project("node-redis", "packages/node-redis", { env: { SAGE_EXPECTED_NODE_REDIS: workspaceNodeRedis } }),
      project("ioredis", "packages/ioredis"),
      project("testkit", "packages/testkit", newerRequested ? {} : { exclude: ["test/NewerServers.test.ts"] }),
      project("cli", "packages/cli"),
      // The connection-level behaviour (connect, reconnect, failover, teardown, the pool, wake-ups, the
      // shared-client layers, clients made from one class) on the oldest node-redis the peer range accepts. The contract over the
      // lock's own connections is left to the main project: it adds nothing version-specific that
      // NodeRedisBackend.test.ts and the shared-client contract do not already cover.
      // On one server flavor (the first asked for, Redis 7 by default): what differs between the
      // versions is the client's, and the main project already runs every flavor.
      project(`node-redis@${oldest}`, "packages/node-redis", {
        alias: { redis: here("packages/node-redis/node_modules/redis-oldest") },
        env: { SAGE_EXPECTED_NODE_REDIS: oldest, SAGE_TEST_FLAVORS: oldestFlavor },
        include: [
          "test/NodeRedisBackend.test.ts",
          "test/SharedClient.test.ts",
          "test/Sentinel.test.ts",
          "test/Cluster.test.ts",
          "test/Failover.test.ts",
          "test/Wakeup.test.ts",
          "test/subscriberSilence.test.ts",
          "test/pool.test.ts",
          "test/groupCommit.test.ts",
          "test/teardown.test.ts",
          "test/clientClass.test.ts",
          "test/nodeRedisVersion.test.ts"
        ]
      }),
      // The fault matrix's CI subset (scripts/faults/test); `npm run faults` runs the whole matrix.
      // Each cell runs servers and worker processes: three at a time keeps a 2-core machine responsive.
      // It runs after the other projects (groupOrder 1), never beside a suite with short leases.
      project("faults", "scripts/faults", { maxConcurrency: 3, sequence: { groupOrder: 1 } })
    ]
  }
})
