package reports

import (
	"context"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
)

// ServeSubscriptions answers main_report_summary on /serve/graphql's Subscription (contract
// 6.11): its query, answered again by the GraphQL path whenever the data changes
// (gqlfield.Live).
type ServeSubscriptions struct{ q *ServeResolver }

func NewServeSubscriptions(q *ServeResolver) *ServeSubscriptions { return &ServeSubscriptions{q: q} }

func (s *ServeSubscriptions) MainReportSummary(ctx context.Context, startDate string, endDate string, filters []*records.Filter, useOr *bool) (<-chan *MainReportSummary, error) {
	return gqlfield.Live(s.q.MainReportSummary(ctx, startDate, endDate, filters, useOr))
}
