package obs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"
)

// MaxLogLine is the longest log line a binary writes; MaxLogValue the
// longest string value in one. Whatever a client sends cannot make a log
// line larger: ids are checked before they are logged, errors and values
// are cut, and a line that would still be too long is replaced.
const (
	MaxLogLine  = 4 << 10
	MaxLogValue = 512
	// LogBuffer bounds the log lines a binary holds before they are
	// written (a few thousand request lines).
	LogBuffer = 1 << 20
)

// NewLogger returns the JSON logger every binary uses: slog's JSONHandler,
// with every string value and error cut to MaxLogValue and every line to
// MaxLogLine, tagged with the service. A line logged with a request's
// context (InfoContext, WarnContext, …) carries the request's request_id
// and trace_id, whoever logs it: the request's fields are in every line it
// causes, and no call site has to remember them.
func NewLogger(w io.Writer, service string) *slog.Logger {
	h := slog.NewJSONHandler(&lineCap{w: w}, &slog.HandlerOptions{Level: slog.LevelInfo})
	return slog.New(capped{h}).With("service", service)
}

// capped cuts what a client could make long (a string, an error's text)
// to MaxLogValue before the JSONHandler writes it. It looks at each value
// and copies a record only when one needs cutting, which a request line
// never does: cheaper than a ReplaceAttr, which slog calls for every
// attribute of every line.
type capped struct{ slog.Handler }

func (c capped) Handle(ctx context.Context, r slog.Record) error {
	long, hasReq, hasTrace := false, false, false
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "request_id":
			hasReq = true
		case "trace_id":
			hasTrace = true
		}
		long = long || needsCut(a.Value)
		return true
	})
	var reqID, traceID string // the context's, where the line lacks them
	if !hasReq {
		reqID = RequestID(ctx)
	}
	if !hasTrace {
		traceID = TraceID(ctx)
	}
	if !long && reqID == "" && traceID == "" {
		return c.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(capAttr(a))
		return true
	})
	if reqID != "" {
		out.AddAttrs(slog.String("request_id", cut(reqID)))
	}
	if traceID != "" {
		out.AddAttrs(slog.String("trace_id", traceID))
	}
	return c.Handler.Handle(ctx, out)
}

func (c capped) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = capAttr(a)
	}
	return capped{c.Handler.WithAttrs(out)}
}

func (c capped) WithGroup(name string) slog.Handler { return capped{c.Handler.WithGroup(name)} }

func needsCut(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString:
		return len(v.String()) > MaxLogValue
	case slog.KindAny, slog.KindLogValuer, slog.KindGroup:
		return true // resolved and looked at by capAttr
	}
	return false
}

func capAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if len(v.String()) > MaxLogValue {
			v = slog.StringValue(cut(v.String()))
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			v = slog.StringValue(cut(err.Error()))
		}
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = capAttr(ga)
		}
		v = slog.GroupValue(out...)
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func cut(s string) string {
	if len(s) <= MaxLogValue {
		return s
	}
	s = s[:MaxLogValue]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…[cut]"
}

// lineCap writes whole log lines, and replaces one over MaxLogLine with a
// line that says so.
type lineCap struct{ w io.Writer }

func (l *lineCap) Write(p []byte) (int, error) {
	if len(p) <= MaxLogLine {
		return l.w.Write(p)
	}
	_, err := fmt.Fprintf(l.w, `{"time":%q,"level":"ERROR","msg":"log line over %d bytes replaced","bytes":%d}`+"\n",
		time.Now().UTC().Format(time.RFC3339Nano), MaxLogLine, len(p))
	return len(p), err
}
