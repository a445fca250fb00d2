#!/usr/bin/env bash
# Imports point one way: root -> app -> modules -> platform (docs/architecture.md). Fails, naming
# the package and the import, when a platform package imports a module or app, a module imports
# app or a generated endpoint package, or a module imports another module (reports and measures may use stats).
# The GraphQL path is one package (platform/graphqlserver): no other package runs gqlgen's
# executor or HTTP handler; the packages it uses for the cache and the JSON (answercache, gqljson,
# jsonscalar) and the generated endpoint packages import neither Fiber, fasthttp nor net/http;
# and modules do not import the encoder's internals (platform/gqljson): they answer lists with
# graphqlserver.List and write columns with platform/jsonscalar.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
bad=0
while read -r pkg imports; do
  from=${pkg#"$mod"/}
  for imp in $imports; do
    case "$imp" in
      github.com/99designs/gqlgen/graphql/executor|github.com/99designs/gqlgen/graphql/handler|github.com/99designs/gqlgen/graphql/handler/transport)
        if [ "$from" != platform/graphqlserver ]; then echo "$from imports $imp: only platform/graphqlserver runs gqlgen (the GraphQL path is one package)"; bad=1; fi
        continue ;;
      github.com/gofiber/fiber/v2|github.com/gofiber/fiber/v2/*|github.com/valyala/fasthttp|github.com/valyala/fasthttp/*|net/http)
        case "$from" in
          platform/answercache|platform/gqljson|platform/jsonscalar|app/gql*)
            echo "$from imports $imp: only platform/graphqlserver speaks HTTP for GraphQL"; bad=1 ;;
        esac
        continue ;;
    esac
    case "$imp" in "$mod"/*) ;; *) continue ;; esac
    rel=${imp#"$mod"/}
    from=${pkg#"$mod"/}
    case "$from" in
      platform/*)
        case "$rel" in modules/*|app|app/*) echo "$from imports $rel: platform must not import modules or app"; bad=1 ;; esac ;;
      modules/*)
        case "$rel" in
          app|app/*) echo "$from imports $rel: modules must not import app or generated packages"; bad=1 ;;
          platform/gqljson) echo "$from imports $rel: modules use graphqlserver.List and platform/jsonscalar, not the encoder's internals"; bad=1 ;;
          modules/*)
            own=$(echo "$from" | cut -d/ -f1-2); other=$(echo "$rel" | cut -d/ -f1-2)
            if [ "$own" != "$other" ] && ! { { [ "$own" = modules/reports ] || [ "$own" = modules/measures ]; } && [ "$other" = modules/stats ]; }; then
              echo "$from imports $rel: modules stand alone (only reports and measures may use stats)"; bad=1
            fi ;;
        esac ;;
    esac
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./platform/... ./modules/... ./app/...)
exit $bad
