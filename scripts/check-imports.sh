#!/usr/bin/env bash
# Imports point one way: root -> app -> modules -> platform (docs/architecture.md). Fails, naming
# the package and the import, when a platform package imports a module or app, a module imports
# app or a generated endpoint package, or a module imports another module (reports may use stats).
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
bad=0
while read -r pkg imports; do
  for imp in $imports; do
    case "$imp" in "$mod"/*) ;; *) continue ;; esac
    rel=${imp#"$mod"/}
    from=${pkg#"$mod"/}
    case "$from" in
      platform/*)
        case "$rel" in modules/*|app|app/*) echo "$from imports $rel: platform must not import modules or app"; bad=1 ;; esac ;;
      modules/*)
        case "$rel" in
          app|app/*) echo "$from imports $rel: modules must not import app or generated packages"; bad=1 ;;
          modules/*)
            own=$(echo "$from" | cut -d/ -f1-2); other=$(echo "$rel" | cut -d/ -f1-2)
            if [ "$own" != "$other" ] && ! { [ "$own" = modules/reports ] && [ "$other" = modules/stats ]; }; then
              echo "$from imports $rel: modules stand alone (only reports may use stats)"; bad=1
            fi ;;
        esac ;;
    esac
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./platform/... ./modules/...)
exit $bad
