# Two commands set everything up on a fresh Debian machine:
#   make demo   throwaway PostgreSQL + demo data + the service on http://127.0.0.1:9090
#   make test   every test (installs PostgreSQL, Chromium, Prometheus, PgBouncer and a pinned Helm
#               when missing)
#   make test-traces  the trace tests against a real Jaeger (built once, ~30 min the first time)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GQLGEN_CONFIGS := $(wildcard app/gql*/gqlgen.yml)

.PHONY: build demo demo-stop test test-traces test-measure test-deps check generate generate-check lint tidy-check imports-check bench bench-smoke soak clean

build:
	go build -trimpath -ldflags "$(LDFLAGS)" -o bin/emsquery .

demo:
	scripts/demo.sh

demo-stop:
	scripts/demo.sh stop

test-deps:
	scripts/test-deps.sh

# Every test, against real PostgreSQL clusters the tests start themselves, then a brief run of
# each fuzz target, package:target (their seed corpora in testdata/fuzz/ run with the tests too),
# with Go 1.27.3 or newer (scripts/fuzz.sh says why).
FUZZ_TARGETS := modules/records:FuzzConvert modules/records:FuzzCompile modules/stats:FuzzPerColumnSQL \
	modules/stats:FuzzSeriesSQL modules/stats:FuzzStatsSQL \
	modules/reports:FuzzExportQuery modules/reports:FuzzArrayLiteral modules/records:FuzzIsTimestampText
FUZZTIME ?= 6s

test: test-deps
	go vet ./...
	go test -count=1 -timeout 20m ./...
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh $(FUZZ_TARGETS)

# The trace tests against a real Jaeger (systemtest/traces_jaeger_test.go, build tag jaeger): Jaeger,
# pinned, is built from source into ~/.cache/emsquery/ the first time (about half an hour, so
# not in make test, whose trace tests use internal/otlptest's receiver), then about a minute.
test-traces:
	scripts/ensure-postgres.sh >/dev/null
	scripts/jaeger.sh >/dev/null
	go test -tags jaeger -count=1 -timeout 10m -run '^TestTracesJaeger' ./systemtest

# Contract 6.10's measure (systemtest/measure_test.go, build tag measure): one key floods the
# costliest requests for a minute while another's answers are timed; not in make test, whose
# run it would lengthen by a minute of full load. CI runs it.
test-measure:
	scripts/ensure-postgres.sh >/dev/null
	go test -tags measure -count=1 -timeout 10m -run '^TestOneCallerCannotTakeItDown$$' -v ./systemtest

# Static checks (with the build tags jaeger and measure, so that systemtest's tagged tests are
# checked too), generated code and tidy modules: what CI demands besides the tests.
check: lint tidy-check imports-check generate-check

# Imports point one way: root -> app -> modules -> platform (docs/architecture.md).
imports-check:
	scripts/check-imports.sh

# Fails when go mod tidy would change go.mod or go.sum (prints the diff it would apply).
tidy-check:
	@go mod tidy -diff || (echo "go.mod/go.sum are not tidy: run go mod tidy and commit"; exit 1)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet -tags jaeger,measure ./...
	go tool staticcheck -tags jaeger,measure ./...

# wire, gqlgen, then the SDL file of each GraphQL endpoint (schema/graphql/, from the
# executable schemas gqlgen just wrote).
generate:
	go tool wire gen .
	for c in $(GQLGEN_CONFIGS); do (cd $$(dirname $$c) && go tool gqlgen generate) || exit 1; done
	go run ./cmd/graphqlschema

# Regenerates wire and gqlgen output and the SDL files and fails when that changes any committed
# file (or leaves a new one).
generate-check:
	go tool wire diff . || (echo "wire_gen.go is stale: run make generate"; exit 1)
	for c in $(GQLGEN_CONFIGS); do (cd $$(dirname $$c) && go tool gqlgen generate) || exit 1; done
	@if [ -n "$$(git status --porcelain -- app)" ]; then git status --short -- app; echo "gqlgen output is stale: run make generate and commit"; exit 1; fi
	go run ./cmd/graphqlschema
	@if [ -n "$$(git status --porcelain -- schema/graphql)" ]; then git status --short -- schema/graphql; echo "schema/graphql/ is stale: run make generate and commit"; exit 1; fi

# A bounded soak, not part of make test: SOAK_DURATION (default 10m) of mixed queries at
# SOAK_RATE (50) req/s against the real binary and a throwaway cluster on 127.0.0.1; fails on any
# error or on RSS/goroutine growth (see cmd/soak).
soak:
	scripts/ensure-postgres.sh >/dev/null
	go run ./cmd/soak

# The service against the database's own speed, side by side (bench/run, docs/benchmarks.md):
# hand-written SQL for the same question and the service's captured SQL, the demo data at
# 100,000 and 1,000,000 records, every workload at concurrency 1 and 16 with the answer cache
# off (cold lines), the dashboard questions again with it on and repeated (warm lines), about
# 16 minutes. BENCH_FLAGS passes flags to bench/run, e.g. BENCH_FLAGS='-sizes 10000000
# -patients-rss 0' for the large size (cold lines only), '-warm-max-records 0' for no warm
# lines, '-profile /tmp/prof' for profiles. Last, the live answers (contract 6.11) on the smallest
# size: 1,000 streams on one question and on 100, three changes each, about 15 s more
# ('-workloads live' alone, '-live-streams 0' without).
bench:
	scripts/ensure-postgres.sh >/dev/null
	go run ./bench/run $(BENCH_FLAGS)

# Every line of make bench, short, on the small size: that each runs and every answer checks
# out (its figures mean nothing on a busy machine); then the answers that follow their tables
# ('-workloads follow', on a cluster of its own kind), short. CI runs it, so that make bench
# cannot break unnoticed.
bench-smoke:
	scripts/ensure-postgres.sh >/dev/null
	go run ./bench/run -sizes 100000 -duration 300ms -warmup 100ms -warm-duration 300ms -rounds 1 -patients-rss 0 -live-streams 100 -live-questions 10 -live-rounds 1
	go run ./bench/run -sizes 100000 -workloads follow -follow-streams 100 -follow-questions 10 -follow-loads 1 -follow-hit-rounds 2 -patients-rss 0

clean:
	rm -rf bin
