/**
 * @sage/lock-testkit: real Redis 7 and Valkey 8 servers started from local binaries, and fault
 * injection (process signals, admin-command faults, a TCP fault proxy) for the @sage/lock suites.
 */

/** Locating server binaries and choosing the flavors under test. */
export * as ServerBinary from "./ServerBinary.ts"

/** The test kit's error type. */
export * as TestkitError from "./TestkitError.ts"

/** Scoped real servers with process-level faults and admin commands. */
export * as RedisServer from "./RedisServer.ts"

/** Server-side faults as thin admin-command Effects. */
export * as Faults from "./Faults.ts"

/** An in-process TCP proxy for latency, stalls, lost replies, resets and refusals. */
export * as FaultProxy from "./FaultProxy.ts"

/** Optional container mode (testcontainers), used by RedisServer when SAGE_TEST_DOCKER=1. */
export * as Docker from "./Docker.ts"
