/**
 * @sage/lock-testkit: real Redis (7, 8.0) and Valkey (8, 9.1) servers started from local binaries,
 * and fault injection (process signals, admin-command faults, a TCP fault proxy) for the @sage/lock
 * suites.
 *
 * @packageDocumentation
 * @module @sage/lock-testkit
 */

/** Locating server binaries and choosing the flavors under test. */
export * as ServerBinary from "./ServerBinary.ts"

/** The test kit's error type. */
export * as TestkitError from "./TestkitError.ts"

/** Scoped real servers with process-level faults and admin commands. */
export * as RedisServer from "./RedisServer.ts"

/** A master with replicas, and replication faults (frozen replicas, cut links). */
export * as Replicated from "./Replicated.ts"

/** A replicated master watched by Sentinels, with failover helpers. */
export * as SentinelTopology from "./SentinelTopology.ts"

/** A Redis Cluster of masters and replicas, with slot lookups and CLUSTER FAILOVER. */
export * as ClusterTopology from "./ClusterTopology.ts"

/** Moving a hash slot between cluster masters step by step (ASK, TRYAGAIN, MOVED). */
export * as ClusterMigration from "./ClusterMigration.ts"

/** The least-privilege ACL of a lock user per deployment mode (docs/topologies.md). */
export * as Acl from "./Acl.ts"

/** Server-side faults as thin admin-command Effects. */
export * as Faults from "./Faults.ts"

/** An in-process TCP proxy for latency, stalls, lost replies, resets and refusals. */
export * as FaultProxy from "./FaultProxy.ts"

/** Optional container mode (testcontainers), used by RedisServer when SAGE_TEST_DOCKER=1. */
export * as Docker from "./Docker.ts"
