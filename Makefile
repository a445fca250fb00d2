# Two commands set everything up on a fresh Debian machine:
#   make demo   throwaway PostgreSQL + demo data + the service on http://127.0.0.1:9090
#   make test   every test (installs PostgreSQL, Chromium and Prometheus when missing)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
GQLGEN_CONFIGS := $(wildcard app/gql*/gqlgen.yml)

.PHONY: build demo demo-stop test test-deps check generate generate-check lint bench clean

build:
	go build -trimpath -ldflags "$(LDFLAGS)" -o bin/emsquery .

demo:
	scripts/demo.sh

demo-stop:
	scripts/demo.sh stop

test-deps:
	scripts/test-deps.sh

# Every test, against real PostgreSQL clusters the tests start themselves.
test: test-deps
	go vet ./...
	go test -count=1 -timeout 20m ./...

# Static checks and generated code: what CI demands besides the tests.
check: lint generate-check

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	go tool staticcheck ./...

generate:
	go tool wire gen .
	for c in $(GQLGEN_CONFIGS); do (cd $$(dirname $$c) && go tool gqlgen generate) || exit 1; done

# Regenerates wire and gqlgen output and fails when that changes any committed file.
generate-check:
	go tool wire diff . || (echo "wire_gen.go is stale: run make generate"; exit 1)
	for c in $(GQLGEN_CONFIGS); do (cd $$(dirname $$c) && go tool gqlgen generate) || exit 1; done
	@if [ -n "$$(git status --porcelain -- app)" ]; then git status --short -- app; echo "gqlgen output is stale: run make generate and commit"; exit 1; fi

clean:
	rm -rf bin
