package database

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the statements' spans.
const tracerName = "github.com/emsanalytics/emsquery/platform/database"

// statementSpans starts a client span for every statement, on the one path every statement
// takes (runOn, for run and RunBatch; CopyTo), following OpenTelemetry's database conventions:
// db.system.name, db.namespace, db.operation.name (the repository's operation, as in the
// metrics), db.query.text (the statement with its $n placeholders: values are parameters and
// never in the text; a batch's statements joined by "; "), db.operation.batch.size for a batch,
// the server the connection went to, and error.type on failure.
//
// pgx has tracer hooks (and otelpgx builds spans on them), but they see the statement without
// the repository's operation name, and not the export's COPY, which runs on the pgconn level;
// here both are at hand. Errors are recorded as their error.type only: a driver's message may
// quote a value.
type statementSpans struct {
	tracer trace.Tracer
	base   []attribute.KeyValue
}

func newStatementSpans(tp trace.TracerProvider, d Options) statementSpans {
	return statementSpans{
		tracer: tp.Tracer(tracerName),
		base:   []attribute.KeyValue{semconv.DBSystemNamePostgreSQL, semconv.DBNamespace(d.Name)},
	}
}

// start starts the span of operation op running statement q; an empty q (the export's COPY,
// whose text holds its values as literals) is left out. extra are further attributes of the
// operation (a batch's size).
//
// A statement outside any request's trace (the answer cache's data-version poll, say) gets no
// span: each would otherwise be a trace of its own, every second.
func (s statementSpans) start(ctx context.Context, op, q string, extra ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := make([]attribute.KeyValue, 0, len(s.base)+2+len(extra))
	attrs = append(attrs, s.base...)
	attrs = append(attrs, extra...)
	attrs = append(attrs, semconv.DBOperationName(op))
	if q != "" {
		attrs = append(attrs, semconv.DBQueryText(q))
	}
	return s.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// connected adds the server the statement's connection goes to.
func connected(span trace.Span, conn *pgxpool.Conn) {
	if !span.IsRecording() {
		return
	}
	addr := conn.Conn().PgConn().Conn().RemoteAddr()
	if tcp, ok := addr.(*net.TCPAddr); ok {
		span.SetAttributes(semconv.ServerAddress(tcp.IP.String()), semconv.ServerPort(tcp.Port))
		return
	}
	span.SetAttributes(semconv.ServerAddress(addr.String()))
}

// end ends the span; a failed statement gets its error.type (see errorType) and an error status
// that names only that.
func end(ctx context.Context, span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		et := errorType(ctx, err)
		span.SetAttributes(semconv.ErrorTypeKey.String(et))
		span.SetStatus(codes.Error, et)
	}
	span.End()
}
