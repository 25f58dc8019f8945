/**
 * Finds the server binary for each flavor under test (Redis 7, Valkey 8) and decides which flavors a
 * test run covers. A missing binary is never a silent skip: it is a `TestkitError` (or a thrown one
 * at collection time) that says how to install it.
 *
 * The path is returned as found, never resolved: `valkey-server` in the Debian package is a symlink
 * to `valkey-check-rdb`, which picks server mode from argv[0], so it must be spawned by that name.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { TestkitError } from "./TestkitError.ts"

/** A server flavor the kit can start. */
export type Flavor = "redis7" | "valkey8"

/** Every flavor, in the order test suites run them. */
export const all: ReadonlyArray<Flavor> = ["redis7", "valkey8"]

/** The environment variable that overrides the binary path of a flavor. */
export const envVar = (flavor: Flavor): string => (flavor === "redis7" ? "REDIS_SERVER_BIN" : "VALKEY_SERVER_BIN")

/** The executable name searched on PATH when the environment variable is unset. */
export const executableName = (flavor: Flavor): string => (flavor === "redis7" ? "redis-server" : "valkey-server")

/** Human-readable install instructions for a flavor's binary. */
export const installAdvice = (flavor: Flavor): string => {
  const apt =
    flavor === "redis7"
      ? "`apt-get install redis-server` (Debian 12 ships Redis 7.0)"
      : "`apt-get install -t bookworm-backports valkey-server` (with bookworm-backports enabled)"
  return [
    `Install ${executableName(flavor)} in one of these ways:`,
    "  - run `bash scripts/toolchain.sh` at the repo root (it provisions both redis-server 7 and valkey-server 8),",
    "    then `source scripts/toolchain.sh` in the shell that runs the tests (it exports VALKEY_SERVER_BIN);",
    `  - ${apt};`,
    `  - or set ${envVar(flavor)}=/path/to/${executableName(flavor)}.`,
    "Choose the flavors to test with SAGE_TEST_FLAVORS=redis7,valkey8 (default: both)."
  ].join("\n")
}

const isExecutableFile = (path: string): boolean => {
  try {
    Fs.accessSync(path, Fs.constants.X_OK)
    return Fs.statSync(path).isFile()
  } catch {
    return false
  }
}

const searchPath = (name: string): string | undefined => {
  for (const dir of (process.env["PATH"] ?? "").split(Path.delimiter)) {
    if (dir === "") continue
    const candidate = Path.join(dir, name)
    if (isExecutableFile(candidate)) return candidate
  }
  return undefined
}

/** Where a binary was found: its path (unresolved) and whether the env var or PATH supplied it. */
export interface Located {
  readonly flavor: Flavor
  readonly path: string
  readonly source: "env" | "path"
}

/**
 * Finds a flavor's binary, or explains why not. A set environment variable is authoritative: if it
 * points nowhere, PATH is not consulted, so a typo cannot silently test another build.
 */
export const locate = (flavor: Flavor): Located | TestkitError => {
  const variable = envVar(flavor)
  const fromEnv = process.env[variable]
  if (fromEnv !== undefined && fromEnv !== "") {
    if (isExecutableFile(fromEnv)) return { flavor, path: fromEnv, source: "env" }
    return new TestkitError({
      reason: "BinaryNotFound",
      message: `${variable}=${fromEnv} is not an executable file (${flavor}).\n${installAdvice(flavor)}`
    })
  }
  const onPath = searchPath(executableName(flavor))
  if (onPath !== undefined) return { flavor, path: onPath, source: "path" }
  return new TestkitError({
    reason: "BinaryNotFound",
    message: `${executableName(flavor)} (${flavor}) was not found: ${variable} is unset and it is not on PATH.\n${installAdvice(
      flavor
    )}`
  })
}

/** The binary path of a flavor as an Effect that fails with `TestkitError` (reason `BinaryNotFound`). */
export const resolve = (flavor: Flavor): Effect.Effect<string, TestkitError> =>
  Effect.suspend(() => {
    const found = locate(flavor)
    return found instanceof TestkitError ? Effect.fail(found) : Effect.succeed(found.path)
  })

/** The flavors whose binary can be found right now. */
export const available = (): Array<Flavor> => all.filter((flavor) => !(locate(flavor) instanceof TestkitError))

/**
 * The flavors a test run must cover: `SAGE_TEST_FLAVORS` (comma list, default all). Throws a
 * `TestkitError` with install advice if a requested flavor's binary is missing or a name is unknown,
 * so a suite fails loudly at collection time instead of skipping a server.
 */
export const flavorsUnderTest = (): Array<Flavor> => {
  const raw = process.env["SAGE_TEST_FLAVORS"]
  const names =
    raw === undefined || raw.trim() === ""
      ? [...all]
      : raw
          .split(",")
          .map((name) => name.trim())
          .filter((name) => name !== "")
  const flavors: Array<Flavor> = []
  for (const name of names) {
    const flavor = all.find((candidate) => candidate === name)
    if (flavor === undefined) {
      throw new TestkitError({
        reason: "BinaryNotFound",
        message: `SAGE_TEST_FLAVORS names an unknown flavor "${name}"; known flavors: ${all.join(", ")}`
      })
    }
    const found = locate(flavor)
    if (found instanceof TestkitError) throw found
    if (!flavors.includes(flavor)) flavors.push(flavor)
  }
  return flavors
}
