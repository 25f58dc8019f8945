// Turns the collected results into the Markdown tables the bench prints. Every comparison is a
// ratio against a named baseline measured in the same run; nothing here judges a number good or bad.
import type { ContendedResult, LatencyResult, RenewalResult, ThroughputResult } from "./locks.ts"
import type { PoolResult } from "./pool.ts"
import { cells, ms, perSecond, ratio, table } from "./stats.ts"

/** One measured configuration: its label, the load when it started, and what it measured. */
export interface Row<A> {
  readonly name: string
  readonly load: number
  readonly result: A
}

export interface Results {
  readonly latency: Array<Row<LatencyResult>>
  readonly throughput: Array<Row<ThroughputResult>>
  readonly contended: Array<Row<ContendedResult>>
  readonly pool: Array<Row<PoolResult>>
  readonly renewal: Array<Row<RenewalResult>>
}

export const baseline = "standalone redis7"

const find = <A>(rows: ReadonlyArray<Row<A>>, name: string): A | undefined =>
  rows.find((row) => row.name === name)?.result

const percentileHeaders = ["p50 ms", "p90 ms", "p99 ms", "max ms"]

export const latencyTable = (rows: ReadonlyArray<Row<LatencyResult>>): string => {
  const base = find(rows, baseline)
  return table(
    [
      "configuration",
      ...percentileHeaders,
      "ops/s",
      "p50 ratio",
      "p99 ratio",
      "acquire p50 ms",
      "release p50 ms",
      "failed calls",
      "load1"
    ],
    rows.map(({ load, name, result }) => [
      name,
      ...cells(result.total),
      perSecond(result.opsPerSecond),
      ratio(result.total.p50, base?.total.p50 ?? Number.NaN),
      ratio(result.total.p99, base?.total.p99 ?? Number.NaN),
      ms(result.acquire.p50),
      ms(result.release.p50),
      String(result.failures),
      load.toFixed(2)
    ])
  )
}

export const throughputTable = (rows: ReadonlyArray<Row<ThroughputResult>>): string => {
  const base = find(rows, baseline)
  return table(
    ["configuration", ...percentileHeaders, "ops/s", "ops/s ratio", "p50 ratio", "failed calls", "load1"],
    rows.map(({ load, name, result }) => [
      name,
      ...cells(result.total),
      perSecond(result.opsPerSecond),
      ratio(result.opsPerSecond, base?.opsPerSecond ?? Number.NaN),
      ratio(result.total.p50, base?.total.p50 ?? Number.NaN),
      String(result.failures),
      load.toFixed(2)
    ])
  )
}

export const contendedTable = (rows: ReadonlyArray<Row<ContendedResult>>): string =>
  table(
    [
      "configuration",
      "acquisitions",
      "seconds",
      "acquisitions/s",
      "wait p50 ms",
      "wait p90 ms",
      "wait p99 ms",
      "wait max ms",
      "handoffs",
      "overlaps",
      "load1"
    ],
    rows.map(({ load, name, result }) => [
      name,
      String(result.acquisitions),
      (result.elapsedMillis / 1000).toFixed(2),
      perSecond(result.perSecond),
      ...cells(result.wait),
      `${result.handoffs} (${((100 * result.handoffs) / Math.max(1, result.acquisitions - 1)).toFixed(0)}%)`,
      String(result.overlaps),
      load.toFixed(2)
    ])
  )

/** Each pool row against the shared client at the same concurrency on the same server. */
export const poolTable = (rows: ReadonlyArray<Row<PoolResult>>): string =>
  table(
    [
      "server",
      "connection",
      "concurrency",
      ...percentileHeaders,
      "ops/s",
      "p50 vs shared",
      "p99 vs shared",
      "ops/s vs shared",
      "load1"
    ],
    rows.flatMap(({ load, name, result }) =>
      result.rows.map((row) => {
        const shared = result.rows.find((other) => other.mode === "shared" && other.concurrency === row.concurrency)
        return [
          name,
          row.mode === "shared" ? "shared, pipelined" : `pool of ${row.connections}`,
          String(row.concurrency),
          ...cells(row.total),
          perSecond(row.opsPerSecond),
          ratio(row.total.p50, shared?.total.p50 ?? Number.NaN),
          ratio(row.total.p99, shared?.total.p99 ?? Number.NaN),
          ratio(row.opsPerSecond, shared?.opsPerSecond ?? Number.NaN),
          load.toFixed(2)
        ]
      })
    )
  )

export const connectTable = (rows: ReadonlyArray<Row<PoolResult>>): string =>
  table(
    ["server", "connects", ...percentileHeaders, "p50 vs one shared acquire+release"],
    rows.map(({ name, result }) => {
      const shared = result.rows.find((row) => row.mode === "shared" && row.concurrency === 1)
      return [
        name,
        String(result.connect.count),
        ...cells(result.connect),
        ratio(result.connect.p50, shared?.total.p50 ?? Number.NaN)
      ]
    })
  )

export const renewalTable = (rows: ReadonlyArray<Row<RenewalResult>>, bodyMillis: number, leaseMillis: number) =>
  table(
    [
      "configuration",
      "renewals",
      "expected",
      "renew p50 ms",
      "renew p90 ms",
      "renew p99 ms",
      "renew max ms",
      "withLock - body ms",
      "body overrun ms",
      "failed calls",
      "load1"
    ],
    rows.map(({ load, name, result }) => [
      name,
      String(result.renewals),
      // Renewal fires every lease/3 from the acquisition; the one due as the body ends may not run.
      `~${Math.ceil(bodyMillis / Math.floor(leaseMillis / 3)) - 1}`,
      ...cells(result.renew),
      ms(result.overrunMillis),
      ms(result.bodyOverrunMillis),
      String(result.failures),
      load.toFixed(2)
    ])
  )

/** The headline: each configuration against its natural baseline, from the tables above. */
export const ratioTable = (results: Results): string => {
  const lat = (name: string) => find(results.latency, name)
  const tp = (name: string) => find(results.throughput, name)
  const pair = (label: string, subject: string, base: string): Array<string> => [
    label,
    ratio(lat(subject)?.total.p50 ?? Number.NaN, lat(base)?.total.p50 ?? Number.NaN),
    ratio(lat(subject)?.total.p99 ?? Number.NaN, lat(base)?.total.p99 ?? Number.NaN),
    ratio(tp(subject)?.opsPerSecond ?? Number.NaN, tp(base)?.opsPerSecond ?? Number.NaN)
  ]
  const rows = [
    pair("valkey8 / redis7 (standalone)", "standalone valkey8", baseline),
    pair("sentinel, ack off / standalone", "sentinel redis7, ack off", baseline),
    pair("sentinel, ack on / ack off", "sentinel redis7, ack on", "sentinel redis7, ack off"),
    pair("sentinel, ack on / standalone", "sentinel redis7, ack on", baseline),
    pair("cluster, ack off / standalone", "cluster redis7, ack off", baseline),
    pair("cluster, ack on / ack off", "cluster redis7, ack on", "cluster redis7, ack off"),
    pair("cluster, ack on / standalone", "cluster redis7, ack on", baseline)
  ]
  for (const { name, result } of results.pool) {
    const row = (mode: "shared" | "pool", concurrency: number, connections: number) =>
      result.rows.find((r) => r.mode === mode && r.concurrency === concurrency && r.connections === connections)
    // What the Lock service adds on top of the two scripts it runs: the same server, same client.
    const rawSequential = row("shared", 1, 1)
    const rawConcurrent = row("shared", 16, 1)
    rows.push([
      `${name}: withLock / raw acquire+release on the shared client`,
      ratio(lat(name)?.total.p50 ?? Number.NaN, rawSequential?.total.p50 ?? Number.NaN),
      ratio(lat(name)?.total.p99 ?? Number.NaN, rawSequential?.total.p99 ?? Number.NaN),
      ratio(tp(name)?.opsPerSecond ?? Number.NaN, rawConcurrent?.opsPerSecond ?? Number.NaN)
    ])
    for (const [concurrency, connections] of [
      [1, 16],
      [16, 16],
      [16, 10]
    ] as const) {
      const pool = row("pool", concurrency, connections)
      const shared = row("shared", concurrency, 1)
      rows.push([
        `${name}: pool of ${connections} / shared, concurrency ${concurrency} (raw)`,
        ratio(pool?.total.p50 ?? Number.NaN, shared?.total.p50 ?? Number.NaN),
        ratio(pool?.total.p99 ?? Number.NaN, shared?.total.p99 ?? Number.NaN),
        ratio(pool?.opsPerSecond ?? Number.NaN, shared?.opsPerSecond ?? Number.NaN)
      ])
    }
  }
  return table(["comparison", "latency p50", "latency p99", "throughput"], rows)
}
