// The SHA1 a server gives a Lua script on `SCRIPT LOAD`, computed locally, for `EVALSHA` commands built
// before (or without waiting for) the load.
import * as Crypto from "node:crypto"

/** The script's SHA1, as `SCRIPT LOAD` answers it. */
export const scriptSha = (lua: string): string => Crypto.createHash("sha1").update(lua).digest("hex")
