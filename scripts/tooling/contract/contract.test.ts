// The contract suite from the packed test kit, run as a third-party backend's tests would run it:
// here against the in-memory backend, whose view of its keys stands in for a server's GET, SET, DEL
// and PTTL (`reach: "keys"`). A backend over a real server gives `ServerControl.ofServer(server)`
// instead and the default reach.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { LockBackend } from "@sage/lock/LockBackend"
import * as MemoryBackend from "@sage/lock/MemoryBackend"
import * as LockContract from "@sage/lock-testkit/contract/LockContract"
import * as ServerControl from "@sage/lock-testkit/contract/ServerControl"

const memory = Layer.effectContext(
  Effect.map(MemoryBackend.makeWithKeys, ({ backend, keys }) =>
    Context.make(LockBackend, backend).pipe(
      Context.add(ServerControl.ServerControl, ServerControl.ofKeys("in-memory", keys))
    )
  )
)

LockContract.suite("in-memory, from the packed test kit", memory, { reach: "keys" })
