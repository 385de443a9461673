#!/usr/bin/env bash
# Installs drover's pinned external tools into one cache folder and prints where they are.
#
#   scripts/tools.sh            install what is missing, then print KEY=path lines
#   scripts/tools.sh --print    only print the paths (no installs)
#
# The folder is $DROVER_TOOLS, or $HOME/.cache/drover/tools. Each tool lives in a
# folder named after its pinned version, so a version bump installs beside the old one.
set -euo pipefail

CLAUDE_VERSION=2.1.332
TEMPORAL_VERSION=v1.5.1
# axe-core, the accessibility rules the web console's browser tests run inside the page.
AXE_VERSION=4.11.0
# The Temporal server (with Postgres persistence) and its SQL schema tool, for the tests that run
# the production layout: the version of the server image docker-compose.yml runs, so that the
# compose file is the one place that names it.
compose_file="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/docker-compose.yml"
TEMPORAL_SERVER_VERSION=v$(sed -n 's|^ *image: temporalio/server:\([0-9][0-9.]*\)$|\1|p' "$compose_file")
[[ "$TEMPORAL_SERVER_VERSION" != v ]] || {
  echo "scripts/tools.sh: no temporalio/server image in $compose_file" >&2
  exit 1
}

root="${DROVER_TOOLS:-$HOME/.cache/drover/tools}"
claude_dir="$root/claude-code-$CLAUDE_VERSION"
claude_bin="$claude_dir/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
temporal_dir="$root/temporal-$TEMPORAL_VERSION"
temporal_bin="$temporal_dir/temporal"
server_dir="$root/temporal-server-$TEMPORAL_SERVER_VERSION"
server_bin="$server_dir/temporal-server"
axe_dir="$root/axe-core-$AXE_VERSION"
axe_js="$axe_dir/node_modules/axe-core/axe.min.js"

# Chromium (the web console's browser tests and benchmark) comes from the system's packages: Debian's
# `chromium`, installed with apt-get when missing and the script runs as root (as CI does).
chromium_bin="${DROVER_CHROMIUM_BIN:-$(command -v chromium || echo /usr/bin/chromium)}"

print() {
  echo "DROVER_CLAUDE_BIN=$claude_bin"
  echo "DROVER_TEMPORAL_BIN=$temporal_bin"
  echo "DROVER_TEMPORAL_SERVER_DIR=$server_dir"
  echo "DROVER_CHROMIUM_BIN=$chromium_bin"
  echo "DROVER_AXE_JS=$axe_js"
}

if [[ "${1:-}" == "--print" ]]; then
  print
  exit 0
fi

mkdir -p "$root"

# npm_install NAME VERSION DIR PACKAGE FILE installs the npm PACKAGE into DIR (through a
# temporary folder, so that a failed install leaves nothing half made), unless FILE, which the
# install must produce, is there already.
npm_install() {
  local name=$1 version=$2 dir=$3 package=$4 file=$5
  if [[ -e "$file" ]]; then
    echo "$name $version: already installed" >&2
    return
  fi
  echo "$name $version: installing with npm into $dir" >&2
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  npm install --silent --no-audit --no-fund --prefix "$tmp" "$package" >&2
  [[ -e "$tmp/${file#"$dir/"}" ]] || {
    echo "$name: ${file#"$dir/"} is missing after npm install" >&2
    exit 1
  }
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

install_claude() {
  npm_install claude "$CLAUDE_VERSION" "$claude_dir" "@anthropic-ai/claude-code@$CLAUDE_VERSION" "$claude_bin"
}

install_temporal() {
  if [[ -x "$temporal_bin" ]]; then
    echo "temporal $TEMPORAL_VERSION: already installed" >&2
    return
  fi
  echo "temporal $TEMPORAL_VERSION: building with go install (about 11 minutes on 2 cores)" >&2
  local tmp="$temporal_dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  GOBIN="$tmp" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_VERSION" >&2
  rm -rf "$temporal_dir"
  mv "$tmp" "$temporal_dir"
}

# install_server builds the server and temporal-sql-tool from one module version, and copies the
# module's Postgres schema beside them (schema/postgresql/v12/{temporal,visibility}), laid out as
# the admin-tools image lays it under /etc/temporal/schema.
install_server() {
  if [[ -x "$server_bin" && -x "$server_dir/temporal-sql-tool" && -d "$server_dir/schema/postgresql/v12" ]]; then
    echo "temporal server $TEMPORAL_SERVER_VERSION: already installed" >&2
    return
  fi
  echo "temporal server $TEMPORAL_SERVER_VERSION: building with go install (about 10 minutes on 2 cores, beside the CLI)" >&2
  local tmp="$server_dir.tmp.$$" mod="go.temporal.io/server@$TEMPORAL_SERVER_VERSION" src
  rm -rf "$tmp"
  mkdir -p "$tmp/bin"
  GOBIN="$tmp/bin" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    go install "go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION" \
    "go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION" >&2
  mv "$tmp/bin/server" "$tmp/temporal-server"
  mv "$tmp/bin/sql" "$tmp/temporal-sql-tool"
  rmdir "$tmp/bin"
  src=$(cd / && GOTOOLCHAIN=local go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d "$src/schema/postgresql/v12" ]] || {
    echo "temporal server: no Postgres schema in $src" >&2
    exit 1
  }
  mkdir -p "$tmp/schema/postgresql"
  cp -R "$src/schema/postgresql/v12" "$tmp/schema/postgresql/"
  chmod -R u+w "$tmp/schema"
  rm -rf "$server_dir"
  mv "$tmp" "$server_dir"
}

install_axe() {
  npm_install axe-core "$AXE_VERSION" "$axe_dir" "axe-core@$AXE_VERSION" "$axe_js"
}

install_chromium() {
  if [[ -x "$chromium_bin" ]]; then
    echo "chromium: already installed ($chromium_bin)" >&2
    return
  fi
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium: missing; install Debian's chromium package (apt-get install chromium) or set DROVER_CHROMIUM_BIN" >&2
    return
  fi
  echo "chromium: installing Debian's chromium with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
  chromium_bin=$(command -v chromium || echo /usr/bin/chromium)
}

# git (the managed workspaces drive the git binary) comes from the system's packages too.
install_git() {
  if command -v git >/dev/null 2>&1; then
    echo "git: already installed ($(git --version))" >&2
    return
  fi
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "git: missing; install Debian's git package (apt-get install git)" >&2
    return
  fi
  echo "git: installing Debian's git with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git >&2
}

ensure_postgres() {
  command -v pg_isready >/dev/null 2>&1 || return 0
  if pg_isready -q -h 127.0.0.1 -p 5432; then
    return
  fi
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    local v
    v=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
    if [[ -n "$v" ]]; then
      echo "postgres: starting cluster $v/main" >&2
      pg_ctlcluster --skip-systemctl-redirect "$v" main start >&2 || true
      for _ in $(seq 1 30); do
        pg_isready -q -h 127.0.0.1 -p 5432 && return
        sleep 1
      done
    fi
  fi
  echo "postgres: not reachable at 127.0.0.1:5432" >&2
}

install_claude &
claude_pid=$!
install_temporal &
temporal_pid=$!
install_server &
server_pid=$!
install_axe
install_chromium
install_git
ensure_postgres
wait "$claude_pid"
wait "$temporal_pid"
wait "$server_pid"
print
