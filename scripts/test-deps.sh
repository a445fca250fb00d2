#!/usr/bin/env bash
# Installs what the tests need beyond Go, when missing: PostgreSQL server binaries, Chromium (the
# GraphiQL browser test), Prometheus (the metrics scrape test; its promtool checks the alert
# rules), PgBouncer (the transaction pooling tests), pandas and requests for Debian's Python (the
# Python client example), the pinned npm packages of e2e/ and of the TypeScript client example,
# and the pinned Helm (the chart test; built once from the Go module proxy by scripts/helm.sh).
# Quick when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-postgres.sh >/dev/null

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || missing+=(prometheus)
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
# docs/examples/python/ runs on Debian's Python with Debian's pandas and requests.
if ! /usr/bin/python3 -c 'import pandas, requests' >/dev/null 2>&1; then
  missing+=(python3-pandas python3-requests)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    # Debian starts a Prometheus service on install; the tests start their own.
    if [[ " ${missing[*]} " == *" prometheus "* ]]; then
      (systemctl stop prometheus 2>/dev/null || service prometheus stop 2>/dev/null || pkill -x prometheus || true) >/dev/null 2>&1
    fi
    # Likewise PgBouncer (where a service manager runs); the tests start their own on free ports.
    if [[ " ${missing[*]} " == *" pgbouncer "* ]]; then
      (systemctl disable --now pgbouncer 2>/dev/null || service pgbouncer stop 2>/dev/null || true) >/dev/null 2>&1
    fi
  else
    echo "missing Debian packages (install them as root): ${missing[*]}" >&2
  fi
fi

# e2e/package.json pins exact versions; no lockfile is kept (it would record registry addresses).
if [ -f e2e/package.json ] && command -v npm >/dev/null 2>&1; then
  # Every dependency of package.json, not just one: a node_modules from before a package was
  # added (and not older than package.json, as after a fresh checkout) would otherwise be kept.
  e2e_missing=$(cd e2e && node -e 'const fs = require("fs");
    const deps = Object.keys(require("./package.json").dependencies || {});
    console.log(deps.filter((d) => !fs.existsSync("node_modules/" + d + "/package.json")).join(" "))')
  if [ -n "$e2e_missing" ] || [ e2e/package.json -nt e2e/node_modules ]; then
    (cd e2e && npm install --ignore-scripts --no-audit --no-fund --no-package-lock --loglevel=error)
    touch e2e/node_modules
  fi
fi

# docs/examples/typescript/ is a reader's project: its lock file (kept without registry addresses,
# see its .npmrc) is installed as is. npm ci leaves node_modules/.package-lock.json, which a newer
# lock file (a pull that changed it, a fresh checkout) outdates.
ts=docs/examples/typescript
if [ -f $ts/package-lock.json ] && command -v npm >/dev/null 2>&1; then
  if [ ! -f $ts/node_modules/.package-lock.json ] || [ $ts/package-lock.json -nt $ts/node_modules/.package-lock.json ]; then
    (cd $ts && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
fi

# The chart test's helm, pinned, cached in ~/.cache/emsquery/ (a few minutes the first time).
scripts/helm.sh >/dev/null
