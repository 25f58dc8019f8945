// The arguments every bench command takes: `--help` prints its usage, `--quick` picks its smoke
// plan, and anything else is refused with exit status 2.
import * as Effect from "effect/Effect"

/** What the command line asks for, or undefined when the command should stop (help, bad arguments). */
export const parse = (usage: string): Effect.Effect<{ readonly quick: boolean } | undefined> =>
  Effect.sync(() => {
    const argv = process.argv.slice(2)
    if (argv.includes("--help")) {
      process.stdout.write(`${usage}\n`)
      return undefined
    }
    const unknown = argv.filter((arg) => arg !== "--quick")
    if (unknown.length > 0) {
      process.stderr.write(`unknown arguments: ${unknown.join(" ")}\n${usage}\n`)
      process.exitCode = 2
      return undefined
    }
    return { quick: argv.includes("--quick") }
  })
