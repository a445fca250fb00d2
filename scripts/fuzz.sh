#!/usr/bin/env bash
# Runs each fuzz target (package:Target) for FUZZTIME. A failing input is written under the
# package's testdata/fuzz and fails the run at once.
#
# The runs use Go 1.27.3 when the go command is older (fetched from the module proxy like a
# module the first time, about 76 MB). Go's fuzzing engine before 1.27 can end a run that found
# nothing with "context deadline exceeded" when -fuzztime is up (https://go.dev/issue/75804):
# the fuzztime context closes its Done channel before it cancels the workers' context derived
# from it, and the coordinator, woken by the first, takes the deadline for a failure because it
# compares the error with the second's, still nil. On a loaded machine the thread that cancels
# is sometimes descheduled between the two. The targets play no part: the coordinator is a
# process of its own, and an input that takes a worker long only delays the stop. Go 1.27
# compares with the fuzztime context's error too.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-6s}
fixed=go1.27.3
IFS=. read -r major minor _ <<<"$(go env GOVERSION | sed -n 's/^go\([0-9]*\.[0-9]*\).*/\1/p')"
if [ -n "${minor:-}" ] && { [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 27 ]; }; }; then
  echo "fuzz: with $fixed, as $(go env GOVERSION)'s engine can fail a run at its deadline"
  export GOTOOLCHAIN=$fixed
fi
for t in "$@"; do
  pkg=${t%%:*} name=${t#*:}
  go test "./$pkg" -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime"
done
