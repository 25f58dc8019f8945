import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { RedisServer, ServerBinary } from "../src/index.ts"
import { isAlive, withEnv } from "./support.ts"

describe("ServerBinary", () => {
  it("finds every flavor under test", () => {
    for (const flavor of ServerBinary.flavorsUnderTest()) assert.include(ServerBinary.available(), flavor)
  })

  it.live("a missing binary is a typed error with install advice", () =>
    Effect.gen(function* () {
      yield* withEnv({ REDIS_SERVER_BIN: "/nonexistent/redis-server" })
      const error = yield* Effect.flip(RedisServer.start({ flavor: "redis7" }))
      assert.strictEqual(error._tag, "TestkitError")
      assert.strictEqual(error.reason, "BinaryNotFound")
      assert.include(error.message, "REDIS_SERVER_BIN=/nonexistent/redis-server")
      assert.include(error.message, "bash scripts/toolchain.sh")
      assert.include(error.message, "apt-get install redis-server")
      assert.isFalse(ServerBinary.available().includes("redis7"))
    })
  )

  it.live("flavorsUnderTest fails loudly for a missing or unknown flavor", () =>
    Effect.gen(function* () {
      yield* withEnv({ SAGE_TEST_FLAVORS: "valkey8" })
      assert.deepStrictEqual(ServerBinary.flavorsUnderTest(), ["valkey8"])
      yield* withEnv({ SAGE_TEST_FLAVORS: "redis7,valkey8", VALKEY_SERVER_BIN: "/nonexistent/valkey-server" })
      assert.throws(() => ServerBinary.flavorsUnderTest(), /VALKEY_SERVER_BIN=\/nonexistent\/valkey-server/)
      yield* withEnv({ SAGE_TEST_FLAVORS: "redis9" })
      assert.throws(() => ServerBinary.flavorsUnderTest(), /unknown flavor "redis9"/)
    })
  )

  // Where an engine may answer, this would start a real container: the Docker path is then exercised by
  // `pnpm run test:docker` instead.
  const engineLikely = process.env["DOCKER_HOST"] !== undefined || Fs.existsSync("/var/run/docker.sock")
  it.live.skipIf(engineLikely)("Docker mode without a Docker engine is a typed error, not a crash", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(RedisServer.start({ docker: true }))
      assert.strictEqual(error.reason, "DockerUnavailable")
      assert.include(error.message, "no Docker engine answered")
    })
  )

  it.live("servers and temp dirs go with their test process even when it is SIGKILLed (watchdog)", () =>
    Effect.gen(function* () {
      const script = [
        `import * as Effect from "effect/Effect"`,
        `import * as RedisServer from ${JSON.stringify(Path.resolve(import.meta.dirname, "../src/RedisServer.ts"))}`,
        `Effect.runFork(Effect.scoped(RedisServer.start().pipe(`,
        `  Effect.tap((s) => Effect.sync(() => console.log(JSON.stringify({ pid: s.pid, dir: s.dir })))),`,
        `  Effect.andThen(Effect.never))))`
      ].join("\n")
      const child = ChildProcess.spawn(
        process.execPath,
        ["--conditions=@sage/source", "--input-type=module", "-e", script],
        {
          cwd: Path.resolve(import.meta.dirname, ".."),
          stdio: ["ignore", "pipe", "inherit"]
        }
      )
      const { pid, dir } = yield* Effect.promise(
        () =>
          new Promise<{ pid: number; dir: string }>((resolve, reject) => {
            child.stdout.once("data", (chunk: Buffer) => resolve(JSON.parse(chunk.toString())))
            child.once("exit", (code) => reject(new Error(`child exited ${code}`)))
          })
      )
      assert.isTrue(isAlive(pid))
      child.kill("SIGKILL")
      const deadline = performance.now() + 5000
      while ((isAlive(pid) || Fs.existsSync(dir)) && performance.now() < deadline) yield* Effect.sleep(20)
      assert.isFalse(isAlive(pid), `server ${pid} survived its SIGKILLed parent`)
      assert.isFalse(Fs.existsSync(dir), `${dir} survived its SIGKILLed parent`)
    })
  )
})
