package reports

import (
	"bufio"
	"log/slog"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/requestctx"
	"github.com/emsanalytics/emsquery/platform/serverconn"
)

// ExportPath is the REST route of the main report's CSV export (GET; HEAD validates only).
const ExportPath = "/v1/reports/main-report/export"

// ExportHandler answers ExportPath. The server mounts it behind the export's key check and
// the client watch (platform/clientwatch.Watched), as it mounts the GraphQL endpoints.
type ExportHandler fiber.Handler

// NewExportHandler is GET /v1/reports/main-report/export: the main report's rows as CSV,
// streamed from the database (see Exporter). Every argument is validated, and the query has
// produced its first row, before the status is sent: a bad argument is a 400 with the REST error
// body and no CSV. After that, a failure (database gone, service stopping) closes the connection
// before the final chunk, so the client sees an incomplete response rather than a CSV that looks
// complete; a client that hangs up makes the next write fail, which cancels the query.
//
// At most LIMITS__MAX_CONCURRENT_EXPORTS exports run at once, and each is one of
// LIMITS__MAX_STREAMED_ANSWERS (see ExportSlots); one past either is refused with Retry-After
// (503 SERVICE_UNAVAILABLE past the total, 429 RATE_LIMITED past its key's share), before any
// statement runs.
//
// A Fiber-native handler, not through the net/http adaptor, which would buffer the whole body.
func NewExportHandler(ex *Exporter, slots *ExportSlots, log *slog.Logger) ExportHandler {
	return func(c *fiber.Ctx) error {
		a, err := ParseExportQuery(string(c.Request().URI().QueryString()))
		if err != nil {
			return err
		}
		if c.Method() == fiber.MethodHead {
			// Validate only: running the COPY for headers alone would waste the database.
			if err := Validate(a); err != nil {
				return err
			}
			setExportHeaders(c, FileName(a))
			return nil
		}
		ctx := c.UserContext()
		release, retryAfter, err := slots.take(requestctx.KeyName(ctx))
		if err != nil {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfter))
			return err
		}
		x, err := ex.Start(ctx, a)
		if err != nil {
			release()
			return err
		}
		setExportHeaders(c, FileName(a))
		netConn := c.Context().Conn()
		start := time.Now()
		// The stream writer runs after this handler returned, so it must not touch c.
		// fasthttp runs the stream writer exactly once, also when the response is never sent
		// (its writes then fail), so the slot is given back there.
		c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
			defer release()
			// fasthttp's own buffer is 4 KiB and every write past it is a hand-over to the
			// goroutine that writes chunks; a larger buffer makes those rarer. A client that
			// stops reading fails the writes after APP__WRITE_TIMEOUT (the server's connections
			// give up then: platform/serverconn), which ends the COPY and gives its database
			// connection back instead of holding it for as long as the client likes.
			bw := bufio.NewWriterSize(w, exportBufferSize)
			res, err := x.Stream(bw, func() { _ = netConn.Close() })
			if err == nil {
				err = bw.Flush()
			}
			if err == nil {
				err = w.Flush()
			}
			ms := float64(time.Since(start).Microseconds()) / 1000
			if err != nil {
				// The 200 and part of the CSV are out; dropping the connection before the last
				// chunk is how HTTP/1.1 says the body is incomplete.
				_ = netConn.Close()
				if serverconn.Stalled(netConn) {
					// The client's doing, not the service's: no warning.
					log.InfoContext(ctx, "export abandoned: the client accepted no byte for APP__WRITE_TIMEOUT; its COPY was cancelled", "bytes", res.Bytes, "duration_ms", ms)
					return
				}
				code, _ := apierr.Classify(err)
				log.WarnContext(ctx, "export incomplete: connection closed", "error", err.Error(), "code", string(code), "bytes", res.Bytes, "duration_ms", ms)
				return
			}
			log.InfoContext(ctx, "export finished", "rows", res.Rows, "bytes", res.Bytes, "duration_ms", ms)
		})
		return nil
	}
}

// exportBufferSize is the export's write buffer: the memory an export holds besides the
// database connection's.
const exportBufferSize = 64 << 10

func setExportHeaders(c *fiber.Ctx, fileName string) {
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+fileName+`"`)
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
}
