import { defineConfig } from "vitest/config"

// Vitest 4+ ignores vitest.workspace.ts: the packages are declared here as projects.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "lock",
          root: "packages/lock",
          include: ["test/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000
        }
      },
      {
        test: {
          name: "node-redis",
          root: "packages/node-redis",
          include: ["test/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000
        }
      },
      {
        test: {
          name: "testkit",
          root: "packages/testkit",
          include: ["test/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000
        }
      }
    ]
  }
})
