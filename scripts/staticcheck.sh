#!/usr/bin/env bash
# Runs staticcheck, pinned here alone, over the module (make lint and make test call it). The
# Go module proxy serves it; the build is cached like any other.
set -euo pipefail
cd "$(dirname "$0")/.."
STATICCHECK_VERSION=v0.8.2
exec go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...
