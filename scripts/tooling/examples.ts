// Extracts every TypeScript example so it can be type-checked like user code: the ```ts blocks of
// README.md, docs/*.md and the package READMEs, and the ```ts blocks in the doc comments
// (`@example`) of the published sources. Each block becomes one module (`export {}` is appended so
// top-level names of different blocks never collide). A block that is intentionally partial declares
// what it leaves out (`declare const body: Effect.Effect<void>`).
//
//   node scripts/tooling/examples.ts <dir>             published examples, checked against the tarballs
//   node scripts/tooling/examples.ts --testkit <dir>   the test kit's examples, checked in the workspace
//                                                      (they start servers and need the workspace's kit)
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "../..")

interface Example {
  readonly source: string
  readonly line: number
  readonly code: string
}

const fence = /^```(ts|typescript)\b/

/** Fenced ts blocks of a Markdown text, or of a doc comment once its leading `*` are stripped. */
const blocks = (source: string, lines: ReadonlyArray<string>): Array<Example> => {
  const found: Array<Example> = []
  let start = -1
  let body: Array<string> = []
  lines.forEach((line, index) => {
    if (start < 0) {
      if (fence.test(line.trim())) {
        start = index
        body = []
      }
    } else if (line.trim() === "```") {
      found.push({ source, line: start + 1, code: body.join("\n") })
      start = -1
    } else {
      body.push(line)
    }
  })
  if (start >= 0) throw new Error(`${source}:${start + 1}: unterminated code block`)
  return found
}

const markdown = (file: string): Array<Example> =>
  blocks(Path.relative(root, file), Fs.readFileSync(file, "utf8").split("\n"))

/** Only the lines inside `/** ... *\/` comments, with the ` * ` margin removed, line numbers kept. */
const docComments = (file: string): Array<Example> => {
  let inside = false
  const lines = Fs.readFileSync(file, "utf8")
    .split("\n")
    .map((line) => {
      const trimmed = line.trim()
      if (!inside && trimmed.startsWith("/**")) inside = true
      const text = inside
        ? trimmed
            .replace(/^\/\*\*/, "")
            .replace(/^\*\/?/, "")
            .replace(/^ /, "")
        : ""
      if (inside && trimmed.endsWith("*/")) inside = false
      return text.replace(/\*\/$/, "")
    })
  return blocks(Path.relative(root, file), lines)
}

const sourceFiles = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .toSorted()
    .map((name) => Path.join(dir, name))

const markdownIn = (dir: string): Array<string> =>
  Fs.readdirSync(dir)
    .filter((name) => name.endsWith(".md"))
    .toSorted()
    .map((name) => Path.join(dir, name))

const published = (): Array<Example> => [
  ...markdown(Path.join(root, "README.md")),
  ...markdownIn(Path.join(root, "docs")).flatMap(markdown),
  ...["packages/lock", "packages/node-redis", "packages/ioredis", "packages/cli"].flatMap((pkg) => [
    ...markdownIn(Path.join(root, pkg)).flatMap(markdown),
    ...sourceFiles(Path.join(root, pkg, "src")).flatMap(docComments)
  ])
]

const testkit = (): Array<Example> => sourceFiles(Path.join(root, "packages/testkit/src")).flatMap(docComments)

const args = process.argv.slice(2)
const kit = args[0] === "--testkit"
const out = kit ? args[1] : args[0]
if (out === undefined) {
  console.error("usage: node scripts/tooling/examples.ts [--testkit] <output dir>")
  process.exit(2)
}
const examples = kit ? testkit() : published()
Fs.rmSync(out, { recursive: true, force: true })
Fs.mkdirSync(out, { recursive: true })
for (const example of examples) {
  const name = `${example.source.replace(/[^A-Za-z0-9]+/g, "_")}_L${example.line}.ts`
  const header = `// ${example.source}:${example.line}\n`
  Fs.writeFileSync(Path.join(out, name), `${header}${example.code}\n\nexport {}\n`)
}
console.log(`examples: ${examples.length} blocks from ${new Set(examples.map((e) => e.source)).size} files -> ${out}`)
