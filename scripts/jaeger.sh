#!/usr/bin/env bash
# Prints the path of the pinned Jaeger (internal/jaegertest.Version) for the trace test against a
# real backend (make test-traces), building it first when it is missing. `go install` refuses
# Jaeger's module (replace directives in its go.mod), so cmd/jaeger is built from the module's
# source as the Go module proxy serves it, in a scratch copy. The first build downloads and
# compiles a lot (about half an hour on two busy cores); the binary is kept in the user's cache
# folder, where internal/jaegertest looks for it. JAEGER_BIN names another binary instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${JAEGER_BIN:-}" ]; then
  [ -x "$JAEGER_BIN" ] || { echo "JAEGER_BIN=$JAEGER_BIN is not an executable" >&2; exit 1; }
  echo "$JAEGER_BIN"
  exit 0
fi

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/jaegertest/jaegertest.go)
[ -n "$version" ] || { echo "no Version in internal/jaegertest/jaegertest.go" >&2; exit 1; }
bin="${XDG_CACHE_HOME:-$HOME/.cache}/emsquery/jaeger-$version/jaeger"
if [ ! -x "$bin" ]; then
  echo "building Jaeger ($version) for the trace test, once: about half an hour" >&2
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  src=$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "github.com/jaegertracing/jaeger@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$src" ] || { echo "go mod download github.com/jaegertracing/jaeger@$version failed" >&2; exit 1; }
  cp -r "$src" "$scratch/jaeger" && chmod -R u+w "$scratch/jaeger"
  mkdir -p "$(dirname "$bin")"
  (cd "$scratch/jaeger" && GOWORK=off go build -o "$bin.new" ./cmd/jaeger) >&2
  mv "$bin.new" "$bin"
fi
echo "$bin"
