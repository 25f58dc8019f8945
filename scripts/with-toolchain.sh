#!/usr/bin/env bash
# Runs a command with the project's toolchain: provisions Node 22, pnpm and the Redis/Valkey
# binaries when missing (scripts/toolchain.sh), installs the workspace from the lockfile when
# node_modules is absent or stale, then runs the command. Used by `npm test` and `npm run demo`,
# so both work on a fresh machine that has only Node 20 and npm.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/toolchain.sh
source "$root/scripts/toolchain.sh"
stamp="$root/node_modules/.install-stamp"
if [ ! -f "$stamp" ] || [ "$root/pnpm-lock.yaml" -nt "$stamp" ]; then
  pnpm install --frozen-lockfile --reporter=append-only >&2
  touch "$stamp"
fi
exec "$@"
