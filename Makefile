# drover's everyday commands. Every target works on a fresh machine: `make tools`
# installs the pinned Claude Code and Temporal CLIs and starts Postgres if it is down.
SHELL := /bin/bash
GO ?= go
export GOTOOLCHAIN ?= local
export GOFLAGS ?= -buildvcs=false

.PHONY: tools demo dev test test-short test-load lint bench fuzz build soak test-restart

tools:
	@scripts/tools.sh

build:
	$(GO) build -o bin/drover ./cmd/drover

## demo: one task end to end (Temporal dev server, Postgres, the real CLI, offline fake API).
demo: tools
	@eval "$$(scripts/tools.sh --print)" && export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN && \
	  $(GO) run ./cmd/drover demo

## dev: Temporal dev server + migrations + a worker, until Ctrl-C.
dev: tools
	@eval "$$(scripts/tools.sh --print)" && export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN && \
	  $(GO) run ./cmd/drover dev

## test: everything, against the real CLI, Temporal dev server and Postgres.
test:
	@scripts/test.sh

## test-load: the end-to-end suite LOAD_N times (default 3) with two busy processes per core
## beside it, as on a loaded CI machine; LOAD_RUN narrows it (a go test -run pattern),
## LOAD_PARALLEL sets how many tests run at once (default 4).
test-load:
	@scripts/test-load.sh

## test-restart: stop the worker RESTART_N times (default 50, SIGTERM or SIGKILL, idle or in a
## turn) with a prompt after each; the API's last conversation must hold every prompt
RESTART_N ?= 50
test-restart: tools
	@eval "$$(scripts/tools.sh --print)" && export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN && \
	  $(GO) test -count=1 -v -run '^TestRestartLoop$$' -timeout 60m ./e2e/ -restart.n=$(RESTART_N)

## soak: SIGKILL the worker in the middle of SOAK_N turns (default 50) on real parts, restart
## it each time, and print what came through (make test runs the same test with 3); and run one
## task of LONG_TURNS turns (default 1000) across continue-as-new (make test: 210).
SOAK_N ?= 50
LONG_TURNS ?= 1000
soak: tools
	@eval "$$(scripts/tools.sh --print)" && export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN && \
	  $(GO) test -count=1 -v -run '^(TestSoak|TestLongTaskAcrossContinueAsNew)$$' -timeout 90m ./e2e/ \
	    -soak.n=$(SOAK_N) -long.turns=$(LONG_TURNS)

## fuzz: every fuzz target for FUZZTIME each (default 1m); make test runs their seeds only.
FUZZTIME ?= 1m
fuzz:
	@for pkg in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
	  for target in $$($(GO) test -list '^Fuzz' ./$$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) ./$$pkg || exit 1; \
	  done; \
	done

## lint: gofmt, vet, staticcheck, and the import rules of docs/architecture.md (a wrong arrow fails).
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@scripts/staticcheck.sh
	$(GO) test -count=1 ./internal/testkit/archcheck/

## bench: every performance figure as a ratio to a baseline measured in the same run, as one table
## (also written to bench-results.json); fails when a figure misses its goal. BENCH_QUICK=1 runs
## small inputs and few runs, and only reports the goals. BENCH_FLAGS passes more flags
## (for example BENCH_FLAGS="-only P1 -runs 11").
bench: tools
	@eval "$$(scripts/tools.sh --print)" && export DROVER_CLAUDE_BIN DROVER_TEMPORAL_BIN DROVER_CHROMIUM_BIN && \
	  $(GO) run ./cmd/drover-bench $(if $(BENCH_QUICK),-quick) $(BENCH_FLAGS)
