/**
 * Finds the server binary for each flavor (Redis 7 and Valkey 8, which the suites run on, and the
 * newer Redis 8.0 and Valkey 9.1) and decides which flavors a test run covers. A missing binary is
 * never a silent skip: it is a `TestkitError` (or a thrown one at collection time) that says how to
 * install it.
 *
 * The path is returned as found, never resolved: `valkey-server` in the Debian package is a symlink
 * to `valkey-check-rdb`, which picks server mode from argv[0], so it must be spawned by that name.
 * On Debian 12 the newer two are the wrappers `redis8-server` and `valkey9-server` that
 * scripts/toolchain.sh writes: they start a Debian sid (or trixie) build through that suite's own
 * loader and libraries, with every argument passed on.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { TestkitError } from "./TestkitError.ts"

/** A server flavor the kit can start. */
export type Flavor = "redis7" | "valkey8" | "redis8" | "valkey9"

/** The flavors the test suites run on (Redis 7, Valkey 8), in the order they run them. */
export const all: ReadonlyArray<Flavor> = ["redis7", "valkey8"]

/**
 * The newer servers, Redis 8.0 and Valkey 9.1. The kit starts them like the others; the suites stay
 * on `all`, and the tests written for these ask for them with `flavorsUnderTest(newer)`.
 *
 * @since 0.2.1
 */
export const newer: ReadonlyArray<Flavor> = ["redis8", "valkey9"]

/**
 * Every flavor the kit can start: `all`, then `newer`.
 *
 * @since 0.2.1
 */
export const known: ReadonlyArray<Flavor> = [...all, ...newer]

const envVars: Record<Flavor, string> = {
  redis7: "REDIS_SERVER_BIN",
  valkey8: "VALKEY_SERVER_BIN",
  redis8: "REDIS8_SERVER_BIN",
  valkey9: "VALKEY9_SERVER_BIN"
}

const executableNames: Record<Flavor, string> = {
  redis7: "redis-server",
  valkey8: "valkey-server",
  redis8: "redis8-server",
  valkey9: "valkey9-server"
}

const packageAdvice: Record<Flavor, string> = {
  redis7: "`apt-get install redis-server` (Debian 12 ships Redis 7.0)",
  valkey8: "`apt-get install -t bookworm-backports valkey-server` (with bookworm-backports enabled)",
  redis8:
    "on Debian 13, whose Redis is 8.0: `apt-get install redis-server`, then REDIS8_SERVER_BIN=/usr/bin/redis-server",
  valkey9:
    "on Debian sid, whose Valkey is 9.1: `apt-get install valkey-server`, then VALKEY9_SERVER_BIN=/usr/bin/valkey-server"
}

/** The environment variable that overrides the binary path of a flavor. */
export const envVar = (flavor: Flavor): string => envVars[flavor]

/** The executable name searched on PATH when the environment variable is unset. */
export const executableName = (flavor: Flavor): string => executableNames[flavor]

/** Human-readable install instructions for a flavor's binary. */
export const installAdvice = (flavor: Flavor): string =>
  [
    `Install ${executableName(flavor)} in one of these ways:`,
    "  - run `bash scripts/toolchain.sh` at the repo root (it provisions redis-server 7 and valkey-server 8 and,",
    "    on Debian, redis-server 8.0 and valkey-server 9.1 with their own runtime), then `source scripts/toolchain.sh`",
    "    in the shell that runs the tests (it exports VALKEY_SERVER_BIN, REDIS8_SERVER_BIN and VALKEY9_SERVER_BIN);",
    `  - ${packageAdvice[flavor]};`,
    `  - or set ${envVar(flavor)}=/path/to/${executableName(flavor)}.`,
    `Choose the flavors to test with SAGE_TEST_FLAVORS=${known.join(",")} (default: all of them; the suites`,
    `run on ${all.join(" and ")}, the tests of the newer servers on ${newer.join(" and ")}).`
  ].join("\n")

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
export const available = (): Array<Flavor> => known.filter((flavor) => !(locate(flavor) instanceof TestkitError))

/**
 * The flavors a test run must cover among `among` (default `all`, the suites' flavors; `newer` for
 * the tests of the newer servers): those `SAGE_TEST_FLAVORS` names (comma list, default every known
 * flavor). Throws a `TestkitError` with install advice if a requested flavor's binary is missing or a
 * name is unknown, so a suite fails loudly at collection time instead of skipping a server.
 */
export const flavorsUnderTest = (among: ReadonlyArray<Flavor> = all): Array<Flavor> => {
  const raw = process.env["SAGE_TEST_FLAVORS"]
  const names =
    raw === undefined || raw.trim() === ""
      ? [...known]
      : raw
          .split(",")
          .map((name) => name.trim())
          .filter((name) => name !== "")
  const flavors: Array<Flavor> = []
  for (const name of names) {
    const flavor = known.find((candidate) => candidate === name)
    if (flavor === undefined) {
      throw new TestkitError({
        reason: "BinaryNotFound",
        message: `SAGE_TEST_FLAVORS names an unknown flavor "${name}"; known flavors: ${known.join(", ")}`
      })
    }
    if (!among.includes(flavor)) continue
    const found = locate(flavor)
    if (found instanceof TestkitError) throw found
    if (!flavors.includes(flavor)) flavors.push(flavor)
  }
  return flavors
}
