#!/usr/bin/env bash
# Builds and packs the five publishable packages into one directory (default: packs/ at the
# repository root), for installing them from a clone while they are not on the npm registry:
#   npm run pack
#   npm install /path/to/clone/packs/*.tgz effect redis ioredis   # in your project
# The package check installs the tarballs this makes the same way, so the path is tested.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(mkdir -p "${1:-$root/packs}" && cd "${1:-$root/packs}" && pwd)
rm -f "$out"/sage-lock-*.tgz
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for dir in packages/lock packages/node-redis packages/ioredis packages/cli packages/testkit; do
  # `pnpm pack` swaps in publishConfig and the exact @sage/lock version for `workspace:*`, and its
  # prepack builds dist/. Its output (and any compiler error) is shown only when it fails.
  if ! (cd "$root/$dir" && pnpm pack --pack-destination "$out" >"$log" 2>&1); then
    cat "$log" >&2
    echo "pack: pnpm pack failed in $dir" >&2
    exit 1
  fi
done
echo "Packed into $out:"
ls -1 "$out"/sage-lock-*.tgz | sed 's/^/  /'
echo
echo "Install them in your project (the CLI is optional):"
echo "  npm install $out/sage-lock-[0-9]*.tgz $out/sage-lock-node-redis-*.tgz effect redis"
echo "or, over ioredis:"
echo "  npm install $out/sage-lock-[0-9]*.tgz $out/sage-lock-node-redis-*.tgz $out/sage-lock-ioredis-*.tgz effect ioredis"
echo "and, for your own backend's tests, the contract suite:"
echo "  npm install --save-dev $out/sage-lock-testkit-*.tgz vitest @effect/vitest"
