// Generated Markdown (docs/faults.md, docs/soak.md) is written already formatted as the repository
// formats Markdown (Prettier with the repository's config), so a generated file passes
// `format:check` as written and never needs a hand edit.
import * as Effect from "effect/Effect"

/** `text` formatted by Prettier as the file at `path` would be by `pnpm run format`. */
export const formatMarkdown = (text: string, path: string): Effect.Effect<string> =>
  Effect.promise(async () => {
    const prettier = await import("prettier")
    const config = (await prettier.resolveConfig(path)) ?? {}
    return prettier.format(text, { ...config, filepath: path })
  })
