package obs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// The logger is slog's JSONHandler: a plain line is exactly what it
// writes. What a client could make long is cut, in attributes, in With
// attributes, in groups and in errors; a line still over 4 KiB is
// replaced by one that says so.
func TestLogLinesAreCapped(t *testing.T) {
	t.Parallel()
	var out, plain bytes.Buffer
	log := NewLogger(&out, "gateway")
	log.Info("request", "route", "GET /v1/config", "status", 200, "duration_us", int64(812))
	slog.New(slog.NewJSONHandler(&plain, nil)).With("service", "gateway").Info("request", "route", "GET /v1/config", "status", 200, "duration_us", int64(812))
	if strip(out.String()) != strip(plain.String()) {
		t.Errorf("a plain line:\n%s\nslog writes:\n%s", out.String(), plain.String())
	}
	long := strings.Repeat("x", 2*MaxLogValue)
	for name, write := range map[string]func(*slog.Logger){
		"a string":    func(l *slog.Logger) { l.Info("m", "v", long) },
		"an error":    func(l *slog.Logger) { l.Error("m", "err", errors.New(long)) },
		"a With":      func(l *slog.Logger) { l.With("v", long).Info("m") },
		"a group":     func(l *slog.Logger) { l.Info("m", slog.Group("g", slog.String("v", long))) },
		"a WithGroup": func(l *slog.Logger) { l.WithGroup("g").Info("m", "v", long) },
	} {
		out.Reset()
		write(log)
		if strings.Contains(out.String(), long[:MaxLogValue+1]) || !strings.Contains(out.String(), "…[cut]") {
			t.Errorf("%s is not cut: %.200s", name, out.String())
		}
	}
	out.Reset()
	var many []any
	for i := range 20 {
		many = append(many, "k"+string(rune('a'+i)), long[:400])
	}
	log.Info("wide", many...)
	if !strings.Contains(out.String(), `"msg":"log line over 4096 bytes replaced"`) || out.Len() > MaxLogLine {
		t.Errorf("a line over 4 KiB: %.200s (%d bytes)", out.String(), out.Len())
	}
}

// strip drops the time field, which differs between two lines.
func strip(line string) string {
	_, rest, _ := strings.Cut(line, `","level"`)
	return rest
}

// A line logged with a request's context carries its request_id and
// trace_id, whoever logs it; one that names them itself is not doubled,
// and a line without a request has neither.
func TestLinesCarryTheirRequestsIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := NewLogger(&buf, "payout")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(WithRequestID(context.Background(), "req_7"),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.WarnContext(ctx, "the payee check failed", "rail", "sepa_instant")
	log.InfoContext(ctx, "named", "request_id", "req_7", "trace_id", "4bf92f3577b34da6a3ce929d0e0e4736")
	log.Warn("no request", "payout_id", "po_1")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`"msg":"the payee check failed","service":"payout","rail":"sepa_instant","request_id":"req_7","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`,
		`"msg":"named","service":"payout","request_id":"req_7","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`,
		`"msg":"no request","service":"payout","payout_id":"po_1"}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d: %s\nwant it to end with %s", i, lines[i], w)
		}
	}
}
