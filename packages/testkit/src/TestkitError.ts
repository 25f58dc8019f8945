/**
 * The one error type of the test kit: a server binary is missing, a server did not start, an admin
 * command failed or timed out, the proxy could not listen, or an operation is unsupported (Docker).
 * The `message` is written for a person reading a failed test; `reason` is for code that matches.
 */
import * as Schema from "effect/Schema"

/** Why a test-kit operation failed. */
export const Reason = Schema.Literals([
  "BinaryNotFound",
  "StartFailed",
  "CommandFailed",
  "Timeout",
  "ProcessFailed",
  "ProxyFailed",
  "Unsupported",
  "DockerUnavailable"
])

/** Why a test-kit operation failed, as a type. */
export type Reason = typeof Reason.Type

/** A test-kit failure: human-readable `message`, machine-matchable `reason`, optional `cause`. */
export class TestkitError extends Schema.TaggedError<TestkitError>()("TestkitError", {
  reason: Reason,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect())
}) {}
