#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries (initdb, pg_ctl, postgres) are on this machine,
# installing Debian's `postgresql` package when they are missing and we are allowed to (root).
# Prints the directory that holds the binaries.
set -euo pipefail

find_bindir() {
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null || true)
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return 0; fi
  return 1
}

if bindir=$(find_bindir); then echo "$bindir"; exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL server binaries not found; install the Debian package 'postgresql'" >&2
  exit 1
fi
echo "installing Debian package postgresql ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq postgresql >&2
# Debian creates and starts a default cluster; we never use it.
find_bindir
