// The network's faults, made by the proxies between the workers and the servers: latency, partitions,
// resets, swallowed replies, refused and silent connections.
import * as Effect from "effect/Effect"
import { direct, eachProxy, proxiesOf } from "./injection.ts"
import type { Scenario } from "./scenario.ts"

export const networkScenarios: ReadonlyArray<Scenario> = [
  {
    id: "proxy-latency",
    fault: "200 ms added each way for every client for 3 s [N5]",
    deployments: direct,
    expect: "exclusion",
    why: "the usable lease counts from send time, so slow replies shorten it, never stretch it",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => proxy.setLatency(200))
        yield* Effect.sleep(3000).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.setLatency(0))))
      })
  },
  {
    id: "partition-all-short",
    fault: "every client cut off for 1 s (proxy stall), then healed [P1]",
    deployments: direct,
    expect: "exclusion",
    why: "commands time out and are retried; late replies after the heal are discarded",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => proxy.stall)
        yield* Effect.sleep(1000).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.heal)))
      })
  },
  {
    id: "partition-one-holder",
    fault: "the worker holding a lock cut off for lease + 1.5 s, the other not, then healed [N1, P1]",
    deployments: direct,
    expect: "exclusion",
    why: "the cut-off holder's body is interrupted at its usable lease, before the key expires and the other worker takes it",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        const { worker } = yield* context.holderWorker(context.longBodyMillis)
        const cut = proxiesOf(context, [worker])
        yield* eachProxy(cut, (proxy) => proxy.stall)
        yield* Effect.sleep(context.leaseMillis + 1500).pipe(Effect.ensuring(eachProxy(cut, (proxy) => proxy.heal)))
      })
  },
  {
    id: "connection-reset",
    fault: "every client connection reset (RST) 4 times, 400 ms apart [N3, P3]",
    deployments: direct,
    expect: "exclusion",
    why: "connection errors are retried after reconnecting",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        for (let i = 0; i < 4; i++) {
          yield* eachProxy(proxiesOf(context), (proxy) => proxy.resetAll)
          yield* Effect.sleep(400)
        }
      })
  },
  {
    id: "lost-replies",
    fault: "one reply swallowed (then the connection reset) 6 times, 300 ms apart [N2, P2]",
    deployments: direct,
    expect: "exclusion",
    why: "the command ran but the client cannot know: acquisition is idempotent (own token means acquired), a lost release leaves the key to its lease",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        for (let i = 0; i < 6; i++) {
          yield* eachProxy(proxiesOf(context), (proxy) => proxy.loseNextReply)
          yield* Effect.sleep(300)
        }
      })
  },
  {
    id: "connection-refused",
    fault: "every connection reset and new ones refused for 1.5 s [P3]",
    deployments: direct,
    expect: "exclusion",
    why: "reconnect attempts fail; the lock's own deadlines bound every wait",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => Effect.andThen(proxy.refuse, proxy.resetAll))
        yield* Effect.sleep(1500).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.accept)))
      })
  },
  {
    id: "connection-silent",
    fault: "every connection open now goes silent (TCP up, nothing forwarded) for 9 s; new ones pass [N2, kept open]",
    deployments: direct,
    expect: "exclusion",
    why: "a connection that leaves a question unanswered for 5 s after a timeout is replaced (standalone, fenced with CLIENT KILL) or closed (Cluster's shared ones), and so is a subscriber after a wait ran out; the commands buffered in the silent ones reach the server at the heal and change nothing",
    deploymentOptions: { proxies: 2 },
    inject: (context) =>
      Effect.gen(function* () {
        yield* eachProxy(proxiesOf(context), (proxy) => proxy.stallOpen)
        yield* Effect.sleep(9000).pipe(Effect.ensuring(eachProxy(proxiesOf(context), (proxy) => proxy.heal)))
      })
  }
]
