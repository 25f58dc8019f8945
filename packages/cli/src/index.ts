/**
 * @sage/lock-cli: the `sage-lock` command line (inspect, list and force-release locks) and its
 * in-process entry point.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Cli from "./Cli.ts"

/** @since 0.1.0 */
export * as CommandFailed from "./CommandFailed.ts"
