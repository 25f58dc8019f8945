import { defineConfig } from "vitest/config"

// The workspace packages export their built dist/ to the world and their sources under the
// "@sage/source" condition: the tests run against src/, so no build is needed first. The rest is
// Vite's default server condition list ("development|production" picks the mode's condition).
const conditions = ["@sage/source", "module", "node", "development|production"]

const project = (
  name: string,
  root: string,
  extra: { readonly maxConcurrency?: number; readonly sequence?: { readonly groupOrder: number } } = {}
) => ({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ["@sage/source", "node", "module-sync"] } },
  test: {
    name,
    root,
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    ...extra
  }
})

// Vitest 4+ ignores vitest.workspace.ts: the packages are declared here as projects.
export default defineConfig({
  test: {
    // Vitest's default on 2 cores is one worker (cores - 1), which runs the files one after another.
    // The suites mostly wait on servers, failovers and timers, so two files at a time roughly halve
    // the run without starving either (the timing-dependent tests keep generous margins).
    maxWorkers: 2,
    projects: [
      project("lock", "packages/lock"),
      project("node-redis", "packages/node-redis"),
      project("testkit", "packages/testkit"),
      project("cli", "packages/cli"),
      // The fault matrix's CI subset (scripts/faults/test); `npm run faults` runs the whole matrix.
      // Each cell runs servers and worker processes: three at a time keeps a 2-core machine responsive.
      // It runs after the other projects (groupOrder 1), never beside a suite with short leases.
      project("faults", "scripts/faults", { maxConcurrency: 3, sequence: { groupOrder: 1 } })
    ]
  }
})
