// The lock backend a demo process runs on, for the deployment its parent started (or REDIS_URL
// names): standalone, Cluster or Sentinel.
import type * as Layer from "effect/Layer"
import type { LockBackend, LockError } from "@sage/lock"
import { NodeRedisBackend } from "@sage/lock-node-redis"
import type { Connection } from "./protocol.ts"

export const backendLayer = (
  connection: Connection
): Layer.Layer<LockBackend.LockBackend, LockError.LockRedisError | LockError.InvalidArgument> => {
  switch (connection._tag) {
    case "standalone":
      return NodeRedisBackend.layer({ url: connection.url })
    case "cluster":
      return NodeRedisBackend.layerCluster({ rootNodes: connection.rootUrls.map((url) => ({ url })) })
    case "sentinel":
      return NodeRedisBackend.layerSentinel({ name: connection.masterName, sentinels: connection.sentinels })
  }
}
