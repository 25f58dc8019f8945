// Latency samples, their summaries and the Markdown tables the bench prints: the sections collect
// samples in milliseconds and the report turns them into rows.
import * as Os from "node:os"

/**
 * Monotonic wall time in milliseconds (sub-microsecond resolution). The bench measures the real
 * system, never under a test clock, so it reads the host's clock directly rather than through Clock.
 */
export const now = (): number => performance.now()

/** The distribution of one set of samples, in milliseconds. */
export interface Summary {
  readonly count: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
}

/** The `q` quantile (0-1) of sorted values by nearest rank, no interpolation (NaN when there are none). */
export const nearestRank = (sorted: ReadonlyArray<number>, q: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

/** Percentiles by nearest rank (no interpolation): every value reported was actually observed. */
export const summarize = (samples: ReadonlyArray<number>): Summary => {
  const sorted = samples.toSorted((a, b) => a - b)
  const rank = (q: number): number => nearestRank(sorted, q)
  return {
    count: sorted.length,
    p50: rank(0.5),
    p90: rank(0.9),
    p99: rank(0.99),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!
  }
}

/** Milliseconds with three significant-ish digits: 0.214, 1.93, 12.4, 1043. */
export const ms = (value: number): string => {
  if (!Number.isFinite(value)) return "-"
  if (value < 1) return value.toFixed(3)
  if (value < 10) return value.toFixed(2)
  if (value < 100) return value.toFixed(1)
  return value.toFixed(0)
}

/** Operations per second, rounded to what a noisy shared machine can tell apart. */
/** The median of finite values (NaN when there are none); the mean of the middle two for even counts. */
export const median = (values: ReadonlyArray<number>): number => {
  const sorted = values.filter(Number.isFinite).toSorted((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * The ranks (0-based, in the sorted values) of a distribution-free confidence interval for the median
 * of `n` values: the largest symmetric pair whose coverage, from the binomial distribution with p = 1/2,
 * is at least 95 %. Undefined when `n` is too small for any (n < 6).
 */
export const medianInterval = (n: number): readonly [number, number] | undefined => {
  // The pair [x(k), x(n - 1 - k)] misses the median when at most k values fall below it or at most k
  // above it: probability 2 * P(B <= k) for B ~ Binomial(n, 1/2), accumulated term by term.
  let term = 0.5 ** n
  let cdf = 0
  let best: number | undefined
  for (let k = 0; k < n / 2; k++) {
    cdf += term
    if (2 * cdf <= 0.05) best = k
    term = (term * (n - k)) / (k + 1)
  }
  return best === undefined ? undefined : [best, n - 1 - best]
}

export const rate = (count: number, elapsedMillis: number): number => (count * 1000) / elapsedMillis

export const perSecond = (value: number): string => {
  if (!Number.isFinite(value)) return "-"
  if (value >= 1000) return String(Math.round(value / 10) * 10)
  return value.toFixed(0)
}

/** `value / base` as "1.23x"; the table says what the base is. */
export const ratio = (value: number, base: number): string =>
  Number.isFinite(value) && Number.isFinite(base) && base > 0 ? `${(value / base).toFixed(2)}x` : "-"

/** The four percentile cells of a summary. */
export const cells = (summary: Summary): Array<string> => [
  ms(summary.p50),
  ms(summary.p90),
  ms(summary.p99),
  ms(summary.max)
]

/** A Markdown table with padded columns, so it reads in a terminal and pastes into the docs. */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? "").length)))
  const line = (row: ReadonlyArray<string>): string =>
    `| ${row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(" | ")} |`
  const rule = `| ${widths.map((width, i) => (i === 0 ? "-".repeat(width) : `${"-".repeat(width - 1)}:`)).join(" | ")} |`
  return [line(headers), rule, ...rows.map(line)].join("\n")
}

/** The one-minute load average now: on a 2-core machine, above ~1 means something else competes. */
export const load1 = (): number => Os.loadavg()[0] ?? Number.NaN
