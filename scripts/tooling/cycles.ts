// Fails when the sources of a package import themselves in a circle. Every `.ts` file under
// `packages/*/src` is read, and each relative `import`/`export ... from` specifier (type-only ones
// included: a type that two modules need from each other is a part of both that belongs below
// them), `import "..."` and `import("...")` is followed to the file it names. Each group of modules
// that reach one another is reported with the shortest cycle through each of its members.
//
//   node scripts/tooling/cycles.ts     (from anywhere; exits 1 when it finds a cycle)
//
// Plain Node, no dependencies: a small tokenizer skips comments, strings, templates and regular
// expressions, so an `import` in a doc comment's example or in a string is not taken for one.
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "../..")

type Token =
  | { readonly kind: "word"; readonly text: string }
  | { readonly kind: "punct"; readonly text: string }
  | { readonly kind: "string"; readonly text: string }
  | { readonly kind: "other"; readonly text: string }

/** Keywords after which a `/` starts a regular expression rather than a division. */
const beforeRegex = new Set([
  "return",
  "typeof",
  "instanceof",
  "in",
  "of",
  "new",
  "delete",
  "void",
  "throw",
  "case",
  "do",
  "else",
  "yield",
  "await"
])

const isWordChar = (char: string): boolean => /[\w$]/.test(char)

/** The tokens of a TypeScript source that matter here: words, punctuation and string literals. */
const tokenize = (source: string): Array<Token> => {
  const tokens: Array<Token> = []
  // One entry per open `{`: true when it opened a template's `${`, so its `}` resumes the template.
  const braces: Array<boolean> = []
  let i = 0
  const regexAllowed = (): boolean => {
    const last = tokens[tokens.length - 1]
    if (last === undefined) return true
    if (last.kind === "word") return beforeRegex.has(last.text)
    if (last.kind === "punct") return last.text !== ")" && last.text !== "]"
    return false
  }
  // Reads template text from `i` (just after a backtick or a `}` closing `${`) to its end or next `${`.
  const templateRest = (): void => {
    while (i < source.length) {
      const char = source[i]!
      if (char === "\\") i += 2
      else if (char === "`") {
        i++
        tokens.push({ kind: "other", text: "template" })
        return
      } else if (char === "$" && source[i + 1] === "{") {
        i += 2
        braces.push(true)
        tokens.push({ kind: "punct", text: "${" })
        return
      } else i++
    }
  }
  while (i < source.length) {
    const char = source[i]!
    const next = source[i + 1]
    if (/\s/.test(char)) i++
    else if (char === "/" && next === "/") {
      while (i < source.length && source[i] !== "\n") i++
    } else if (char === "/" && next === "*") {
      const end = source.indexOf("*/", i + 2)
      i = end === -1 ? source.length : end + 2
    } else if (char === '"' || char === "'") {
      let j = i + 1
      let text = ""
      while (j < source.length && source[j] !== char && source[j] !== "\n") {
        if (source[j] === "\\") {
          text += source[j + 1] ?? ""
          j += 2
        } else text += source[j++]
      }
      i = j + 1
      tokens.push({ kind: "string", text })
    } else if (char === "`") {
      i++
      templateRest()
    } else if (char === "/" && regexAllowed()) {
      let j = i + 1
      let inClass = false
      while (j < source.length && source[j] !== "\n") {
        const c = source[j]!
        if (c === "\\") j++
        else if (c === "[") inClass = true
        else if (c === "]") inClass = false
        else if (c === "/" && !inClass) break
        j++
      }
      i = j + 1
      while (i < source.length && isWordChar(source[i]!)) i++
      tokens.push({ kind: "other", text: "regex" })
    } else if (isWordChar(char)) {
      let j = i
      while (j < source.length && isWordChar(source[j]!)) j++
      tokens.push({ kind: "word", text: source.slice(i, j) })
      i = j
    } else if (char === "{") {
      braces.push(false)
      tokens.push({ kind: "punct", text: "{" })
      i++
    } else if (char === "}") {
      i++
      if (braces.pop() === true) templateRest()
      else tokens.push({ kind: "punct", text: "}" })
    } else {
      tokens.push({ kind: "punct", text: char })
      i++
    }
  }
  return tokens
}

const isPunct = (token: Token | undefined, text: string): boolean => token?.kind === "punct" && token.text === text
const isWord = (token: Token | undefined, text: string): boolean => token?.kind === "word" && token.text === text

/** Every module specifier a source imports or re-exports from, type-only ones included. */
const specifiers = (source: string): Array<string> => {
  const tokens = tokenize(source)
  const found: Array<string> = []
  // After `from`: the specifier, if a string follows.
  const fromAt = (at: number): void => {
    const specifier = tokens[at + 1]
    if (isWord(tokens[at], "from") && specifier?.kind === "string") found.push(specifier.text)
  }
  for (let at = 0; at < tokens.length; at++) {
    const token = tokens[at]!
    if (token.kind !== "word" || isPunct(tokens[at - 1], ".")) continue
    if (token.text === "import") {
      const next = tokens[at + 1]
      if (next?.kind === "string") found.push(next.text)
      else if (isPunct(next, "(")) {
        const argument = tokens[at + 2]
        if (argument?.kind === "string") found.push(argument.text)
      } else if (!isPunct(next, ".")) {
        // `import <clause> from "..."`: the clause holds no string, so the first one is the specifier.
        let end = at + 1
        while (end < tokens.length && tokens[end]!.kind !== "string" && !isPunct(tokens[end], ";")) end++
        fromAt(end - 1)
      }
    } else if (token.text === "export") {
      let end = at + 1
      if (isWord(tokens[end], "type")) end++
      if (isPunct(tokens[end], "*")) {
        end++
        if (isWord(tokens[end], "as")) end += 2
        fromAt(end)
      } else if (isPunct(tokens[end], "{")) {
        while (end < tokens.length && !isPunct(tokens[end], "}")) end++
        fromAt(end + 1)
      }
    }
  }
  return found
}

/** The file a relative specifier names, if it is one of `files`. */
const resolve = (from: string, specifier: string, files: ReadonlySet<string>): string | undefined => {
  const base = Path.resolve(Path.dirname(from), specifier)
  const candidates = [base, base.replace(/\.js$/, ".ts"), `${base}.ts`, Path.join(base, "index.ts")]
  return candidates.find((candidate) => files.has(candidate))
}

const sourceFiles = (): Array<string> => {
  const packages = Path.join(root, "packages")
  return Fs.readdirSync(packages)
    .map((name) => Path.join(packages, name, "src"))
    .filter((dir) => Fs.existsSync(dir))
    .flatMap((dir) =>
      Fs.readdirSync(dir, { recursive: true, encoding: "utf8" })
        .filter((name) => name.endsWith(".ts") && !name.split(Path.sep).includes("node_modules"))
        .map((name) => Path.join(dir, name))
    )
    .toSorted()
}

/** The groups of modules that reach one another (Tarjan's strongly connected components). */
const components = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  const visit = (node: string): void => {
    index.set(node, index.size)
    low.set(node, index.get(node)!)
    stack.push(node)
    onStack.add(node)
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next)
        low.set(node, Math.min(low.get(node)!, low.get(next)!))
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!))
    }
    if (low.get(node) !== index.get(node)) return
    const component: Array<string> = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== node)
    const selfLoop = (graph.get(node) ?? []).includes(node)
    if (component.length > 1 || selfLoop) found.push(component.toSorted())
  }
  for (const node of graph.keys()) if (!index.has(node)) visit(node)
  return found
}

/** The shortest cycle from `start` back to itself within `members` (breadth-first). */
const shortestCycle = (
  graph: ReadonlyMap<string, ReadonlyArray<string>>,
  members: ReadonlySet<string>,
  start: string
): Array<string> => {
  const previous = new Map<string, string>()
  const queue = [start]
  for (let head = 0; head < queue.length; head++) {
    const node = queue[head]!
    for (const next of graph.get(node) ?? []) {
      if (!members.has(next)) continue
      if (next === start) {
        const path = [node]
        while (path[0] !== start) path.unshift(previous.get(path[0]!)!)
        return [...path, start]
      }
      if (previous.has(next)) continue
      previous.set(next, node)
      queue.push(next)
    }
  }
  return [start]
}

/** A cycle written from its first member in sorted order, so rotations of one cycle compare equal. */
const canonical = (cycle: ReadonlyArray<string>): string => {
  const nodes = cycle.slice(0, -1)
  const first = nodes.indexOf(nodes.toSorted()[0]!)
  const rotated = [...nodes.slice(first), ...nodes.slice(0, first)]
  return [...rotated, rotated[0]].join(" -> ")
}

const relative = (file: string): string => Path.relative(root, file)

const main = (): number => {
  const files = sourceFiles()
  const known = new Set(files)
  const graph = new Map<string, Array<string>>()
  for (const file of files) {
    const targets = specifiers(Fs.readFileSync(file, "utf8"))
      .filter((specifier) => specifier.startsWith("./") || specifier.startsWith("../"))
      .flatMap((specifier) => resolve(file, specifier, known) ?? [])
    graph.set(file, [...new Set(targets)])
  }
  const groups = components(graph)
  if (groups.length === 0) {
    console.log(`no import cycles in packages/*/src (${files.length} files)`)
    return 0
  }
  for (const group of groups) {
    const members = new Set(group)
    const cycles = new Set(group.map((member) => canonical(shortestCycle(graph, members, member).map(relative))))
    console.error(`import cycle among ${group.length} module(s):`)
    for (const cycle of cycles) console.error(`  ${cycle}`)
  }
  console.error(
    `${groups.length} import cycle group(s) in packages/*/src: move what both sides need into a module below them`
  )
  return 1
}

process.exitCode = main()
