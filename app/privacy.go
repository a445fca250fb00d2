package app

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// smallCellRootFields are the /graphql fields a key with min_cell above 1 may use (contract
// 6.12.4): the EMS performance measures, which suppress small counts, and the unit lists,
// which hold none. Every other field answers counts or records that would give small cells
// away.
var smallCellRootFields = map[string]bool{
	"interval_stats": true, "demand_grid": true, "period_comparison": true, "unit_hour_utilization": true,
	"station_resources": true, "resources": true,
	"__typename": true, "__schema": true, "__type": true,
}

// smallCellFields is /graphql's field middleware that refuses, with FORBIDDEN, a root field a
// key with min_cell above 1 may not use. The key's threshold also keys the answer cache, so a
// kept answer of another key never reaches it.
func smallCellFields(ctx context.Context, next graphql.Resolver) (any, error) {
	k := requestctx.MinCell(ctx)
	if !auth.SmallCellKey(k) {
		return next(ctx)
	}
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Object != "Query" && fc.Object != "Subscription" || smallCellRootFields[fc.Field.Name] {
		return next(ctx)
	}
	return nil, &apierr.Error{Code: apierr.Forbidden, Message: fmt.Sprintf(
		"%s: the API key %q has min_cell %d and may use only interval_stats, demand_grid, period_comparison, unit_hour_utilization, station_resources and resources on /graphql, and /lookups/graphql",
		fc.Field.Name, requestctx.KeyName(ctx), k)}
}
