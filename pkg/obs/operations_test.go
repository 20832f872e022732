package obs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
)

// LogLine writes what LogAttrs writes, at the logger's level and above.
func TestLogLineWritesWhatLogAttrsWrites(t *testing.T) {
	t.Parallel()
	var viaLine, viaAttrs bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	line, attrs := slog.New(slog.NewJSONHandler(&viaLine, opts)), slog.New(slog.NewJSONHandler(&viaAttrs, opts))
	ctx := context.Background()
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelError} {
		LogLine(ctx, line, l, "request", slog.String("route", "POST /v1/bank/payout"), slog.Int("status", 201))
		attrs.LogAttrs(ctx, l, "request", slog.String("route", "POST /v1/bank/payout"), slog.Int("status", 201))
	}
	want := `{"level":"INFO","msg":"request","route":"POST /v1/bank/payout","status":201}` + "\n" +
		`{"level":"ERROR","msg":"request","route":"POST /v1/bank/payout","status":201}` + "\n"
	if viaLine.String() != want || viaAttrs.String() != want {
		t.Errorf("LogLine wrote\n%s\nLogAttrs wrote\n%s\nwant\n%s", viaLine.String(), viaAttrs.String(), want)
	}
}

func TestLogCallEndsWithTheCallsOutcome(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	ctx := context.WithValue(context.Background(), requestIDKey{}, "req-1")
	LogCall(ctx, log, "payout", envelope.New(envelope.CodeQuoteExpired, "gone"), time.Now(), slog.String("quote_id", "q-1"))
	LogCall(ctx, log, "payout", errors.New("boom"), time.Now())
	re := regexp.MustCompile(`^\{"time":"[^"]+","level":"INFO","msg":"payout","quote_id":"q-1","code":"quote_expired","request_id":"req-1","trace_id":"","duration_us":[0-9]+\}
\{"time":"[^"]+","level":"INFO","msg":"payout","code":"internal","request_id":"req-1","trace_id":"","duration_us":[0-9]+\}
$`)
	if !re.MatchString(out.String()) {
		t.Errorf("got\n%s", out.String())
	}
}
