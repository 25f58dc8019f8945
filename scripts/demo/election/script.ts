// The election demo's scenario, run against three candidate processes and the observer: the first
// leader is killed (SIGKILL) and its lease has to run out; the next is frozen (SIGSTOP) past its
// lease, the third candidate takes over, and the frozen one resumes to find its term over; then the
// lead is resigned and handed over five times; then every candidate stops. Each change is timed from
// the signal or the resign line to the moment the observer is shown the new leader.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type { Election } from "@sage/lock"
import { monotonicMicros } from "../protocol.ts"
import type { CandidateProcess, Heard } from "./candidates.ts"
import { currentLeader, findLeader, type Observer, type Seen } from "./observer.ts"

/** The run could not go on: a step did not happen in time. */
export class DemoFailed extends Data.TaggedError("DemoFailed")<{ readonly message: string }> {}

/** One change of leader: from whom to whom, and how long after its cause the observer was shown it. */
export interface Handover {
  readonly from: string
  readonly to: string
  readonly millis: number
}

export interface Measurements {
  readonly kill: Handover
  readonly freeze: Handover
  readonly resigns: ReadonlyArray<Handover>
  /** What went wrong along the way that the logs alone do not show. */
  readonly problems: ReadonlyArray<string>
}

export interface Setup {
  readonly observer: Observer
  readonly candidates: ReadonlyArray<CandidateProcess>
  readonly log: ReadonlyArray<Heard>
  /** How many candidates wait in line for the election's lock, read on the server. */
  readonly waiters: Effect.Effect<number>
  readonly leaseMillis: number
  /** How long the second leader stays frozen: past its lease, so that it loses the lead. */
  readonly frozenMillis: number
  readonly resignRounds: number
  readonly say: (line: string) => void
}

const stepTimeoutMillis = 15_000
const startTimeoutMillis = 45_000

/** The change from `previous` to `seen`, timed from `since` (`monotonicMicros`). */
const handover = (previous: Seen, seen: Seen, since: number): Handover => ({
  from: previous.leader.candidate,
  to: seen.leader.candidate,
  millis: Math.round((seen.at - since) / 1000)
})

export const run = (setup: Setup): Effect.Effect<Measurements, DemoFailed> =>
  Effect.gen(function* () {
    const { observer, log, leaseMillis, frozenMillis, say } = setup
    const problems: Array<string> = []

    /** Polls `find` every 10 ms until it answers, or `timeoutMillis` passed (then `undefined`). */
    const poll = <A>(find: Effect.Effect<A | undefined>, timeoutMillis: number): Effect.Effect<A | undefined> =>
      Effect.suspend(() => {
        const deadline = performance.now() + timeoutMillis
        const loop: Effect.Effect<A | undefined> = Effect.flatMap(find, (found) =>
          found !== undefined || performance.now() >= deadline || observer.failure() !== undefined
            ? Effect.succeed(found)
            : Effect.andThen(Effect.sleep(10), loop)
        )
        return loop
      })
    const until = <A>(what: string, find: Effect.Effect<A | undefined>, timeoutMillis = stepTimeoutMillis) =>
      Effect.flatMap(poll(find, timeoutMillis), (found) =>
        found === undefined
          ? Effect.fail(new DemoFailed({ message: observer.failure() ?? `${what}: not within ${timeoutMillis} ms` }))
          : Effect.succeed(found)
      )
    const processOf = (seen: Seen): Effect.Effect<CandidateProcess, DemoFailed> => {
      const found = setup.candidates.find((process) => process.candidate === seen.leader.candidate)
      return found === undefined
        ? Effect.fail(new DemoFailed({ message: `the leader "${seen.leader.candidate}" is none of the candidates` }))
        : Effect.succeed(found)
    }
    const writesOf = (seen: Seen, ok: boolean, since = 0) =>
      log.filter(
        ({ candidate, event }) =>
          candidate === seen.leader.candidate &&
          event.t === "work" &&
          event.term === seen.leader.term &&
          event.ok === ok &&
          event.at >= since
      ).length
    const working = (seen: Seen, writes: number) =>
      until(
        `${seen.leader.candidate} makes ${writes} accepted writes in term ${seen.leader.term}`,
        Effect.sync(() => (writesOf(seen, true) >= writes ? true : undefined))
      )
    const inLine = (count: number) =>
      until(
        `${count} candidate(s) waiting in line`,
        Effect.map(setup.waiters, (waiters) => (waiters >= count ? waiters : undefined))
      )
    /** The next leader shown from index `from` on, after `previous`'s term, that `accept` takes. */
    const next = (
      what: string,
      previous: Seen,
      from: number,
      accept: (leader: Election.Leader) => boolean = () => true
    ) =>
      until(
        what,
        Effect.sync(() => findLeader(observer, from, (leader) => leader.term > previous.leader.term && accept(leader)))
      )

    // The first leader works, with both others in line. Three Node processes loading their modules at
    // once can take seconds on a busy machine.
    const first = yield* until(
      "a first leader",
      Effect.sync(() => currentLeader(observer)),
      startTimeoutMillis
    )
    yield* working(first, 5)
    yield* inLine(2)

    // Killed, it cannot resign: its lease has to run out before the next in line takes over.
    const killed = yield* processOf(first)
    let from = observer.seen.length
    const killAt = monotonicMicros()
    yield* killed.signal("SIGKILL")
    say(
      `>> SIGKILL ${killed.candidate} (pid ${killed.pid}) after ${writesOf(first, true)} accepted writes: ` +
        `it cannot resign, so its ${leaseMillis} ms lease has to run out`
    )
    const second = yield* next(
      "a leader after the kill",
      first,
      from,
      (leader) => leader.candidate !== first.leader.candidate
    )
    const kill = handover(first, second, killAt)
    say(`>> ${kill.to} leads, seen ${kill.millis} ms after the kill`)

    // Frozen past its lease, the second leader loses the lead to the third candidate. It works for a
    // while first, so that it is frozen in the middle of its work.
    yield* Effect.sleep(500)
    yield* working(second, 5)
    yield* inLine(1)
    const frozen = yield* processOf(second)
    from = observer.seen.length
    const freezeAt = monotonicMicros()
    yield* frozen.signal("SIGSTOP")
    say(`>> SIGSTOP ${frozen.candidate} (pid ${frozen.pid}) for ${frozenMillis} ms, past its ${leaseMillis} ms lease`)
    const third = yield* Effect.forkChild(
      next(
        "a leader while the second is frozen",
        second,
        from,
        (leader) => leader.candidate !== second.leader.candidate
      )
    )
    yield* Effect.sleep(Math.max(0, frozenMillis - (monotonicMicros() - freezeAt) / 1000))
    const resumeAt = monotonicMicros()
    yield* frozen.signal("SIGCONT")
    say(`>> SIGCONT ${frozen.candidate}: it must find its term ${second.leader.term} over`)
    const thirdSeen = yield* Fiber.join(third)
    const freeze = handover(second, thirdSeen, freezeAt)
    const ended = yield* poll(
      Effect.sync(() =>
        log.find(
          ({ candidate, event }) =>
            candidate === frozen.candidate && event.t === "end" && event.term === second.leader.term
        )
      ),
      5_000
    )
    const stale = writesOf(second, true, resumeAt)
    if (stale > 0) {
      problems.push(
        `${frozen.candidate} resumed and the fence accepted ${stale} write(s) of its lost term ${second.leader.term}`
      )
    }
    if (ended === undefined || ended.event.t !== "end") {
      problems.push(`${frozen.candidate} never reported the end of term ${second.leader.term} after it resumed`)
    } else {
      say(
        `>> ${frozen.candidate} ended term ${second.leader.term} (${ended.event.how}) ` +
          `${Math.round((ended.event.at - resumeAt) / 1000)} ms after SIGCONT; its writes sent since the freeze: ` +
          `${writesOf(second, true, freezeAt)} accepted, ${writesOf(second, false, freezeAt)} rejected by the fence`
      )
    }

    // Resigning hands the lead to the candidate in line at once.
    const resigns: Array<Handover> = []
    for (let round = 1; round <= setup.resignRounds; round++) {
      const leader = yield* until(
        "a leader to resign",
        Effect.sync(() => currentLeader(observer))
      )
      yield* working(leader, 3)
      yield* inLine(1)
      const resigning = yield* processOf(leader)
      from = observer.seen.length
      const resignAt = monotonicMicros()
      yield* resigning.resign
      const seen = yield* next(`a leader after resign ${round}`, leader, from)
      const change = handover(leader, seen, resignAt)
      resigns.push(change)
      say(`>> resign ${round}: ${change.from} -> ${change.to}, seen ${change.millis} ms after the resign line`)
    }

    // Candidates in line stop first, then the leader, so nobody takes over on the way out.
    say(">> stopping the candidates (stdin closed): the leader resigns as it goes")
    from = observer.seen.length
    const stopAt = monotonicMicros()
    const leader = currentLeader(observer)?.leader.candidate
    const running = setup.candidates.filter((process) => !process.exited())
    yield* Effect.forEach(
      running.filter((process) => process.candidate !== leader),
      (process) => process.stop(5_000),
      { concurrency: "unbounded", discard: true }
    )
    yield* Effect.forEach(
      running.filter((process) => process.candidate === leader),
      (process) => process.stop(5_000),
      { discard: true }
    )
    const vacant = yield* poll(
      Effect.sync(() => {
        const last = observer.seen[observer.seen.length - 1]
        return observer.seen.length > from && last !== undefined && Option.isNone(last.state) ? last : undefined
      }),
      10_000
    )
    if (vacant === undefined) problems.push(`the observer was not shown "nobody leads" after every candidate stopped`)
    else say(`>> nobody leads, seen ${Math.round((vacant.at - stopAt) / 1000)} ms after the stop began`)
    return { kill, freeze, resigns, problems }
  })
