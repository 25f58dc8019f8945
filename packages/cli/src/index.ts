/**
 * @sage/lock-cli: the `sage-lock` command line (inspect, list and force-release locks) and its
 * in-process entry point.
 *
 * @packageDocumentation
 * @module @sage/lock-cli
 * @since 0.2.0
 */

/**
 * `sage-lock`'s commands and `Cli.run(args)`, its in-process entry point.
 *
 * @since 0.2.0
 */
export * as Cli from "./Cli.ts"

/**
 * The failure a command reports, with any password taken out.
 *
 * @since 0.2.0
 */
export * as CommandFailed from "./CommandFailed.ts"
