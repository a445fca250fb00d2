#!/usr/bin/env bash
# Prints the path of the pinned Helm (internal/deploytest.HelmVersion) for the chart tests
# (deploy/helm/emsquery), building it first when it is missing: `go install` from the module
# source the Go module proxy serves (no release download: this machine reaches no other site).
# The first build takes a few minutes on two cores; the binary is kept in the user's cache
# folder, where internal/deploytest looks for it. HELM_BIN names another binary instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${HELM_BIN:-}" ]; then
  [ -x "$HELM_BIN" ] || { echo "HELM_BIN=$HELM_BIN is not an executable" >&2; exit 1; }
  echo "$HELM_BIN"
  exit 0
fi

version=$(sed -n 's/^const HelmVersion = "\(.*\)"$/\1/p' internal/deploytest/helm.go)
[ -n "$version" ] || { echo "no HelmVersion in internal/deploytest/helm.go" >&2; exit 1; }
dir="${XDG_CACHE_HOME:-$HOME/.cache}/emsquery/helm-$version"
if [ ! -x "$dir/helm" ]; then
  echo "building Helm ($version) for the chart tests, once: a few minutes" >&2
  mkdir -p "$dir"
  # Outside this module (its go.mod must not gain Helm's dependencies), with a scratch GOBIN so
  # that a failed build leaves no half-written binary where the tests look.
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  (cd "$scratch" && GOWORK=off GOFLAGS=-mod=mod GOBIN="$scratch/bin" CGO_ENABLED=0 \
    go install -trimpath "helm.sh/helm/v3/cmd/helm@$version") >&2
  mv "$scratch/bin/helm" "$dir/helm"
fi
echo "$dir/helm"
