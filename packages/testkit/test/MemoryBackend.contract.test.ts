// The lock contract on the in-memory backend, on the live clock, as far as it reaches without a
// server (`reach: "keys"`): every test that needs no raw command and no paused server, with the
// backend's key view standing in for GET, SET, DEL and PTTL. The same suite runs against every
// server deployment in packages/node-redis and packages/ioredis.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { LockBackend } from "@sage/lock/LockBackend"
import * as MemoryBackend from "@sage/lock/MemoryBackend"
import * as LockContract from "../src/contract/LockContract.ts"
import * as ServerControl from "../src/contract/ServerControl.ts"

const memory = Layer.effectContext(
  Effect.map(MemoryBackend.makeWithKeys, ({ backend, keys }) =>
    Context.make(LockBackend, backend).pipe(
      Context.add(ServerControl.ServerControl, ServerControl.ofKeys("in-memory", keys))
    )
  )
)

LockContract.suite("in-memory", memory, { reach: "keys" })
