// The one clock every process of the peers bench reads, so that their timestamps can be merged.

/**
 * Milliseconds on the host's monotonic clock (`process.hrtime`, CLOCK_MONOTONIC on Linux). Every process
 * on the host reads the same clock, so acquisitions reported by different workers line up exactly; a
 * per-process origin such as `performance.timeOrigin` is itself a wall-clock reading taken at start.
 */
export const clockMillis = (): number => Number(process.hrtime.bigint()) / 1e6
