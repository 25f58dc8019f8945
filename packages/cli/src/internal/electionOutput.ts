// What `leader` and `watch` print: a line per state for people, or one object of JSON per state for
// scripts (`--json`; nobody leading is `{"leader":null}` so every line has the same fields).
import * as Option from "effect/Option"
import type { Election } from "@sage/lock"
import { printable } from "./output.ts"

/** One election state as the commands report it. */
export interface LeaderReport {
  readonly election: string
  readonly leader: {
    readonly term: number
    readonly candidate: string
    readonly value: string
    readonly since: string
    readonly revision: number
  } | null
}

export const leaderReport = (election: string, state: Option.Option<Election.Leader>): LeaderReport => ({
  election,
  leader: Option.match(state, {
    onNone: () => null,
    onSome: (leader) => ({
      term: leader.term,
      candidate: leader.candidate,
      value: leader.value,
      since: new Date(leader.since).toISOString(),
      revision: leader.revision
    })
  })
})

/** One state for people: who leads, in which term, since when, and what it proclaimed. */
export const leaderText = (report: LeaderReport): string => {
  const name = printable(report.election)
  const leader = report.leader
  if (leader === null) return `${name}: nobody leads`
  const value = leader.value === "" ? "" : ` value=${JSON.stringify(printable(leader.value))}`
  const revision = leader.revision > 1 ? ` (proclamation ${leader.revision})` : ""
  return `${name}: term ${leader.term} led by ${printable(leader.candidate)} since ${leader.since}${value}${revision}`
}

/** A `watch` line: the time it was seen, then the state. */
export const watchText = (report: LeaderReport, seenAt: Date): string =>
  `${seenAt.toISOString()}  ${leaderText(report)}`
