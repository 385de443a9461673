#!/usr/bin/env bash
# Runs the end-to-end suite on a machine whose CPU is taken: two busy processes per core run
# beside it for the whole run. The suite runs LOAD_N times in a row (default 3) and the first
# failed run fails the whole. LOAD_RUN narrows the tests (a go test -run pattern; default all).
# LOAD_PARALLEL is how many tests run at once (default 4: the tests mostly wait on CLIs, git and
# Temporal, so more than one per core keeps a taken CPU busy with the suite rather than idle).
# LOAD_TIMEOUT bounds one run (a safety net: on a machine other work also loads, one CLI start
# can take half a minute and the whole suite well over an hour).
# The busy processes are this script's own children and are stopped when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
n="${LOAD_N:-3}"
run="${LOAD_RUN:-.}"
parallel="${LOAD_PARALLEL:-4}"
timeout="${LOAD_TIMEOUT:-180m}"

paths=$(scripts/tools.sh)
eval "$paths"
export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN DROVER_TEMPORAL_SERVER_DIR DROVER_CHROMIUM_BIN

# Build first, without the load: the load is for the tests, not the compiler.
go test -count=1 -run '^$' ./e2e/ >/dev/null

busy=()
stop_load() {
  if ((${#busy[@]})); then
    kill "${busy[@]}" 2>/dev/null || true
    wait "${busy[@]}" 2>/dev/null || true
  fi
}
trap stop_load EXIT
cores=$(nproc)
for ((i = 0; i < 2 * cores; i++)); do
  yes >/dev/null &
  busy+=("$!")
done
echo "test-load: ${#busy[@]} busy processes on $cores cores; $n run(s) of -run '$run', $parallel at once"

for ((r = 1; r <= n; r++)); do
  echo "test-load: run $r of $n"
  start=$(date +%s)
  if ! go test -count=1 -timeout "$timeout" -parallel "$parallel" -run "$run" ./e2e/; then
    echo "test-load: run $r of $n failed" >&2
    exit 1
  fi
  echo "test-load: run $r of $n passed in $(($(date +%s) - start)) s"
done
echo "test-load: $n run(s) passed under load"
