#!/usr/bin/env bash
# `pnpm run test:docker [vitest filters...]`: the suites with their standalone servers in containers
# (SAGE_TEST_DOCKER=1: testcontainers, images redis:7 and valkey/valkey:8). testcontainers is a
# devDependency of the test kit, so `pnpm install` is all the setup; this script first asks for a
# Docker engine and stops with a clear message when none answers, instead of failing test by test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root/packages/testkit"
if ! engine=$(node -e '
  import("testcontainers")
    .then((tc) => tc.getContainerRuntimeClient())
    .then((client) => console.log(`${client.info.engine.serverVersion} (${client.info.containerRuntime.host})`))
    .catch((error) => { console.error(String(error?.message ?? error)); process.exit(1) })' 2>&1); then
  cat >&2 <<MSG
test:docker: no Docker engine answered, so nothing ran.
  testcontainers said: $engine
  It looks at DOCKER_HOST, ~/.testcontainers.properties and the default socket (/var/run/docker.sock).
  Start Docker (or point DOCKER_HOST at an engine), or run the suites on local binaries: npm test
MSG
  exit 1
fi
echo "test:docker: Docker engine $engine"
cd "$root"
SAGE_TEST_DOCKER=1 exec pnpm exec vitest run "$@"
