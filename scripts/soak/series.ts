// A quantity sampled over a run (heap, RSS, CPU, connections): where it started and ended, its
// extremes, its mean, and its trend, the least-squares slope per minute over the samples. A heap that
// rises and falls with garbage collection but has no leak has a slope near zero; a leak shows as a
// slope that stays positive however long the run.

export interface Point {
  /** Milliseconds. */
  readonly t: number
  readonly value: number
}

export interface Summary {
  readonly count: number
  readonly start: number
  readonly min: number
  readonly max: number
  readonly end: number
  readonly mean: number
  /** Least-squares slope, in units per minute (NaN with fewer than two samples). */
  readonly slopePerMinute: number
}

export const summarize = (points: ReadonlyArray<Point>): Summary => {
  const n = points.length
  if (n === 0) {
    return { count: 0, start: NaN, min: NaN, max: NaN, end: NaN, mean: NaN, slopePerMinute: NaN }
  }
  let sumT = 0
  let sumV = 0
  let min = Infinity
  let max = -Infinity
  for (const { t, value } of points) {
    sumT += t
    sumV += value
    min = Math.min(min, value)
    max = Math.max(max, value)
  }
  const meanT = sumT / n
  const mean = sumV / n
  let covariance = 0
  let variance = 0
  for (const { t, value } of points) {
    covariance += (t - meanT) * (value - mean)
    variance += (t - meanT) ** 2
  }
  return {
    count: n,
    start: points[0]!.value,
    min,
    max,
    end: points[n - 1]!.value,
    mean,
    slopePerMinute: variance > 0 ? (covariance / variance) * 60_000 : NaN
  }
}

/** The points of `samples` from `fromMillis` on: the first seconds of a run are its ramp-up. */
export const after = <S extends { readonly t: number }>(
  samples: ReadonlyArray<S>,
  fromMillis: number,
  value: (sample: S) => number
): Array<Point> =>
  samples.filter((sample) => sample.t >= fromMillis).map((sample) => ({ t: sample.t, value: value(sample) }))
