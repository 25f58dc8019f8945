// One command on an ioredis client or cluster, given as the lock's connections take it (its name
// first, then its arguments): what every connection of this package sends through.
export interface Callable {
  call(command: string, ...args: Array<string>): Promise<unknown>
}

export const sendOn =
  (redis: Callable) =>
  (args: ReadonlyArray<string>): Promise<unknown> =>
    redis.call(args[0]!, ...args.slice(1))
