#!/usr/bin/env bash
# Runs drover's whole test suite against real parts. It installs the pinned tools
# (or finds them in the cache), makes sure Postgres is up, checks formatting and
# vet and staticcheck, then runs every test with the race detector through internal/testkit/testgate,
# which prints the output as `go test` would and fails the run on a failed
# test, package or build, and on any skipped test that .ci/skip-allowlist does
# not name: with the tools installed, no test has a reason to skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

paths=$(scripts/tools.sh)
eval "$paths"
export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN DROVER_TEMPORAL_SERVER_DIR DROVER_CHROMIUM_BIN

unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
scripts/staticcheck.sh

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/testgate" ./internal/testkit/testgate
# pipefail: the run fails if either go test or the gate does.
go test -race -count=1 -json -timeout 40m "$@" ./... | "$bin/testgate" -allow .ci/skip-allowlist
