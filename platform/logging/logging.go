// Package logging builds the service's slog.Logger: console and rotating file, plain or JSON,
// as the LOG__* settings say.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// Options are the LOG__* settings.
type Options struct {
	Level       slog.Level // LOG__LEVEL (LevelCritical for CRITICAL)
	Path        string     // LOG__PATH: the log file's folder
	Console     bool       // LOG__CONSOLE__ENABLED
	ConsoleJSON bool       // LOG__CONSOLE__FORMAT=json (else plain)
	File        bool       // LOG__FILE__ENABLED
	Filename    string     // LOG__FILE__FILENAME
	MaxSize     int64      // LOG__FILE__MAX_SIZE: bytes of a file before it rotates
	MaxFiles    int        // LOG__FILE__MAX_FILES, the current file included
}

// LevelCritical sits above slog's Error level; it is logged with the name CRITICAL.
const LevelCritical = slog.LevelError + 4

// New returns the logger and a cleanup that writes every line still queued and closes the log
// file. Records go through a recordQueue, so that logging a request costs it neither the
// formatting of its line nor a system call.
func New(lc Options) (*slog.Logger, func(), error) {
	opts := &slog.HandlerOptions{Level: lc.Level, ReplaceAttr: levelNames}
	var (
		handlers []slog.Handler
		outs     []*output
		roller   *rotatingFile
	)
	if lc.File {
		var err error
		if roller, err = openFile(lc); err != nil {
			return nil, nil, err
		}
		file := newOutput(roller, int(min(lc.MaxSize, defaultBatch)))
		// Files are always JSON lines: they are read by tools more often than by people.
		handlers = append(handlers, slog.NewJSONHandler(file, opts))
		outs = append(outs, file)
	}
	if lc.Console {
		console := newOutput(os.Stdout, 0)
		handlers = append([]slog.Handler{newHandler(console, lc.ConsoleJSON, opts)}, handlers...)
		outs = append(outs, console)
	}
	var h slog.Handler
	switch len(handlers) {
	case 0:
		return slog.New(slog.DiscardHandler), func() {}, nil
	case 1:
		h = handlers[0]
	default:
		h = slog.NewMultiHandler(handlers...)
	}
	q := newRecordQueue(outs, maxQueued)
	cleanup := func() {
		_ = q.Close()
		if roller != nil {
			_ = roller.Close()
		}
	}
	return slog.New(requestIDHandler{queuedHandler{q, h}}), cleanup, nil
}

func openFile(lc Options) (*rotatingFile, error) {
	if err := os.MkdirAll(lc.Path, 0o750); err != nil {
		return nil, fmt.Errorf("LOG__PATH: cannot create %q: %w", lc.Path, err)
	}
	name := filepath.Join(lc.Path, lc.Filename)
	// MaxFiles counts the current file too.
	roller, err := newRotatingFile(name, lc.MaxSize, lc.MaxFiles-1)
	if err != nil {
		return nil, fmt.Errorf("LOG__PATH: cannot open %q: %w", name, err)
	}
	// Fail at start-up, not on the first log line, when the folder is not writable.
	if _, err := roller.Write(nil); err != nil {
		return nil, fmt.Errorf("LOG__PATH: cannot write %q: %w", name, err)
	}
	return roller, nil
}

func newHandler(w io.Writer, json bool, opts *slog.HandlerOptions) slog.Handler {
	if json {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// levelNames writes levels with the specification's names (WARNING, CRITICAL). Every level
// becomes a string, INFO and DEBUG too: left a slog.Level, the JSON handler would write it
// through json.Marshal (a few microseconds and allocations on every access line).
func levelNames(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 || a.Key != slog.LevelKey {
		return a
	}
	lvl, ok := a.Value.Any().(slog.Level)
	if !ok {
		return a
	}
	switch {
	case lvl >= LevelCritical:
		a.Value = slog.StringValue("CRITICAL")
	case lvl >= slog.LevelError:
		a.Value = slog.StringValue("ERROR")
	case lvl >= slog.LevelWarn:
		a.Value = slog.StringValue("WARNING")
	default:
		a.Value = slog.StringValue(lvl.String())
	}
	return a
}

// requestIDHandler adds the request id and the trace id of the context to every record logged
// with one, so that all lines about a request can be found by its id, and its trace from them.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestctx.RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
