#!/usr/bin/env bash
# Runs drover's whole test suite against real parts. It installs the pinned tools
# (or finds them in the cache), makes sure Postgres is up, checks formatting and
# vet, then runs every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

paths=$(scripts/tools.sh)
eval "$paths"
export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN

unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -race -count=1 -timeout 40m "$@" ./...
