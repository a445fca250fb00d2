#!/usr/bin/env bash
# Imports point one way: root -> app -> modules -> platform (docs/architecture.md). Fails, naming
# the package (or file) and the import, when a platform package imports a module or app, a
# module imports app or a generated endpoint package, or a module imports another module (any
# module may use the records module: the record filter and the column catalog; measures may use
# stats' GraphQL types for buckets, group values and percentiles, which its answers share).
# The GraphQL path is split by job: platform/gqlhttp (the HTTP endpoint), platform/gqlexec (the
# execution: only it runs gqlgen's executor), platform/gqllive (live answers), platform/gqlfield
# (what modules answer fields with). gqlexec imports neither Fiber nor fasthttp; gqlfield and the
# packages the answers are made with (answercache, gqljson, jsonscalar) and the generated
# endpoint packages import neither Fiber, fasthttp nor net/http. Modules answer lists with
# gqlfield.List and write columns with platform/jsonscalar: they import neither the encoder's
# internals (platform/gqljson) nor the rest of the GraphQL path, and a module's only file that
# may import Fiber or fasthttp is its REST routes' (route.go).
# Settings reach packages one way: the root translates config's sections into each package's
# own options, so no package below the root (tests and systemtest included; bench/ and internal/
# tooling may) imports platform/config.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
bad=0
while read -r pkg imports; do
  from=${pkg#"$mod"/}
  for imp in $imports; do
    case "$imp" in
      github.com/99designs/gqlgen/graphql/executor|github.com/99designs/gqlgen/graphql/handler|github.com/99designs/gqlgen/graphql/handler/transport)
        if [ "$from" != platform/gqlexec ]; then echo "$from imports $imp: only platform/gqlexec runs gqlgen"; bad=1; fi
        continue ;;
      github.com/gofiber/fiber/v2|github.com/gofiber/fiber/v2/*|github.com/valyala/fasthttp|github.com/valyala/fasthttp/*|net/http)
        case "$from" in
          platform/answercache|platform/gqljson|platform/jsonscalar|platform/gqlfield|app/gql*)
            echo "$from imports $imp: only platform/gqlhttp and platform/gqllive speak HTTP for GraphQL"; bad=1 ;;
          platform/gqlexec)
            if [ "$imp" != net/http ]; then echo "$from imports $imp: the execution knows no HTTP framework (platform/gqlhttp reads the request)"; bad=1; fi ;;
        esac
        continue ;;
    esac
    case "$imp" in "$mod"/*) ;; *) continue ;; esac
    rel=${imp#"$mod"/}
    case "$from" in
      platform/*)
        case "$rel" in modules/*|app|app/*) echo "$from imports $rel: platform must not import modules or app"; bad=1 ;; esac ;;
      modules/*)
        case "$rel" in
          app|app/*) echo "$from imports $rel: modules must not import app or generated packages"; bad=1 ;;
          platform/gqljson) echo "$from imports $rel: modules use gqlfield.List and platform/jsonscalar, not the encoder's internals"; bad=1 ;;
          platform/gqlexec|platform/gqlhttp|platform/gqllive) echo "$from imports $rel: modules answer fields with platform/gqlfield, and know no transport"; bad=1 ;;
          modules/*)
            own=$(echo "$from" | cut -d/ -f1-2); other=$(echo "$rel" | cut -d/ -f1-2)
            if [ "$own" != "$other" ] && [ "$other" != modules/records ] && ! { [ "$own" = modules/measures ] && [ "$other" = modules/stats ]; }; then
              echo "$from imports $rel: modules stand alone (any may use modules/records; measures may use stats' bucket and group types)"; bad=1
            fi ;;
        esac ;;
    esac
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./platform/... ./modules/... ./app/...)
# Tests of the GraphQL path and of the modules' lists may use the generated endpoint packages
# (app/gql*) and internal/gqltest as fixtures (they are what the answers are written for), never
# app itself.
while read -r pkg imports; do
  for imp in $imports; do
    if [ "$imp" = "$mod/app" ]; then echo "${pkg#"$mod"/} (tests) imports app: tests below app use app/gql* and internal/gqltest"; bad=1; fi
  done
done < <(go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./platform/... ./modules/...)
# A module knows HTTP only in its REST routes (route.go), as the export's.
while read -r dir files; do
  for f in $files; do
    [ "$f" = route.go ] && continue
    if grep -qE '"(github\.com/gofiber/fiber/v2|github\.com/valyala/fasthttp)(/[^"]*)?"' "$dir/$f"; then
      echo "${dir#"$PWD"/}/$f imports Fiber or fasthttp: in a module only route.go (its REST routes) may"; bad=1
    fi
  done
done < <(go list -f '{{.Dir}} {{join .GoFiles " "}}' ./modules/...)
while read -r pkg imports; do
  from=${pkg#"$mod"/}
  [ "$from" = platform/config ] && continue
  for imp in $imports; do
    if [ "$imp" = "$mod/platform/config" ]; then
      echo "$from imports platform/config: the root translates the settings into the package's own options"; bad=1
    fi
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./platform/... ./modules/... ./app/... ./systemtest/...)
exit $bad
