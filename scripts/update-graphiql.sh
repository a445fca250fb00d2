#!/usr/bin/env bash
# Refreshes platform/graphiql/assets/dist/ from the exact versions pinned in
# platform/graphiql/assets/package.json. dist/ is committed and embedded in the binary with
# go:embed, so builds and sites never reach npm or a CDN; this script is only run by a developer
# who bumps a pin (then commit dist/ and update the versions in assets/README.md).
#
# It installs in a temporary folder (nothing lands in the work tree but dist/), copies the UMD
# builds and their licence files, drops the sourceMappingURL comment (the map is not shipped, so
# the browser's devtools would only get a 404 for it), writes SHA256SUMS (checked by the Go tests),
# and refuses assets that would load anything from the network at run time.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
assets="$root/platform/graphiql/assets"
dist="$assets/dist"

command -v npm >/dev/null 2>&1 || { echo "update-graphiql: npm is needed (apt-get install -y npm)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$assets/package.json" "$tmp/"
# A lockfile is used when someone adds one; without it the exact pins decide what is copied (only
# files of the pinned top-level packages are copied, so transitive versions cannot change dist/).
# --ignore-scripts: nothing from the packages runs on this machine.
if [ -f "$assets/package-lock.json" ]; then
  cp "$assets/package-lock.json" "$tmp/"
  (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
else
  (cd "$tmp" && npm install --ignore-scripts --no-audit --no-fund --no-package-lock --loglevel=error)
fi

nm="$tmp/node_modules"
# The installed versions must be exactly the pinned ones (a range in package.json would be a bug).
for pkg in graphiql react react-dom; do
  want=$(node -p "require('$assets/package.json').dependencies['$pkg']")
  got=$(node -p "require('$nm/$pkg/package.json').version")
  if [ "$want" != "$got" ]; then
    echo "update-graphiql: $pkg: pinned $want but npm installed $got; pin an exact version" >&2
    exit 1
  fi
done

rm -rf "$dist"
mkdir -p "$dist"
# name in dist/ <- file in node_modules
copy() { sed '/^\/\/# sourceMappingURL=/d; /^\/\*# sourceMappingURL=.*\*\/$/d' "$nm/$2" >"$dist/$1"; }
copy graphiql.min.js graphiql/graphiql.min.js
copy graphiql.min.css graphiql/graphiql.min.css
copy react.production.min.js react/umd/react.production.min.js
copy react-dom.production.min.js react-dom/umd/react-dom.production.min.js
cp "$nm/graphiql/LICENSE" "$dist/graphiql.LICENSE.txt"
cp "$nm/react/LICENSE" "$dist/react.LICENSE.txt"
cp "$nm/react-dom/LICENSE" "$dist/react-dom.LICENSE.txt"

# Network check. CSS: every url() must be an inline data: URI (fonts and images are inlined in
# GraphiQL 3's CSS) and there must be no @import. JS: every absolute URL must be on a host known to
# appear only as text (XML namespace URIs, links in docs and error messages), never as something
# the page loads; a new host fails the update so that a person looks at it.
fail=0
css="$dist/graphiql.min.css"
if grep -qi '@import' "$css"; then echo "update-graphiql: $css has @import" >&2; fail=1; fi
remote_urls=$(grep -oiE 'url\([[:space:]]*["'"'"']?[^"'"'"' )]{0,40}' "$css" | grep -viE 'url\([[:space:]]*["'"'"']?data:' || true)
if [ -n "$remote_urls" ]; then echo "update-graphiql: $css loads non-inline resources:" >&2; echo "$remote_urls" >&2; fail=1; fi
allowed='^(www\.w3\.org|github\.com|en\.wikipedia\.org|commonmark\.org|codemirror\.net|reactjs\.org)$'
for f in graphiql.min.js react.production.min.js react-dom.production.min.js; do
  hosts=$(grep -oE 'https?://[A-Za-z0-9.-]+' "$dist/$f" | sed -E 's#https?://##' | sort -u || true)
  bad=$(echo "$hosts" | grep -vE "$allowed" | grep -v '^$' || true)
  if [ -n "$bad" ]; then echo "update-graphiql: $f names unreviewed hosts (check they are not loaded, then allow them here):" >&2; echo "$bad" >&2; fail=1; fi
  if grep -qE '["'"'"'(]//[A-Za-z0-9-]+\.[A-Za-z0-9.-]+/' "$dist/$f"; then echo "update-graphiql: $f has a protocol-relative URL" >&2; fail=1; fi
done
[ "$fail" = 0 ] || exit 1

(cd "$dist" && sha256sum -- *.js *.css *.txt >SHA256SUMS)

echo "update-graphiql: dist/ refreshed:"
(cd "$dist" && ls -l)
for pkg in graphiql react react-dom; do
  echo "  $pkg $(node -p "require('$nm/$pkg/package.json').version") ($(node -p "require('$nm/$pkg/package.json').license"))"
done
echo "Update the versions and sizes in platform/graphiql/assets/README.md if they changed."
