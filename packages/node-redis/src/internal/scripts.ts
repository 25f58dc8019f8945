// Runs the lock scripts by SHA1 (`EVALSHA`), falling back to `EVAL` on `NOSCRIPT`, which also puts
// the script back into the server's cache (after a restart, a failover or `SCRIPT FLUSH`).
import { createHash } from "node:crypto"
import { LockScripts } from "@sage/lock"

export interface Script {
  readonly name: string
  readonly lua: string
  readonly sha1: string
}

const script = (name: string, lua: string): Script => ({
  name,
  lua,
  sha1: createHash("sha1").update(lua).digest("hex")
})

export const acquire: Script = script("acquire", LockScripts.acquire)
export const renew: Script = script("renew", LockScripts.renew)
export const release: Script = script("release", LockScripts.release)

export const all: ReadonlyArray<Script> = [acquire, renew, release]

/** Arguments of `EVALSHA`/`EVAL` for a one-key script. */
export const evalArgs = (
  mode: "EVALSHA" | "EVAL",
  self: Script,
  key: string,
  args: ReadonlyArray<string>
): Array<string> => [mode, mode === "EVALSHA" ? self.sha1 : self.lua, "1", key, ...args]
