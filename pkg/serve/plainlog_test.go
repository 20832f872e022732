package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// counting counts the records its JSONHandler had to write.
type counting struct {
	slog.Handler
	n *int
}

func (c counting) Handle(ctx context.Context, r slog.Record) error {
	*c.n++
	return c.Handler.Handle(ctx, r)
}

func (c counting) WithAttrs(as []slog.Attr) slog.Handler {
	return counting{c.Handler.WithAttrs(as), c.n}
}

// pair is the same logger twice: ours, and slog's JSONHandler alone.
type pair struct {
	ours, theirs slog.Handler
	got, want    *bytes.Buffer
	slow         *int
}

func newPair(with ...slog.Attr) pair {
	p := pair{got: new(bytes.Buffer), want: new(bytes.Buffer), slow: new(int)}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: capValue}
	h := newPlainJSON(&lineCap{w: p.got}, opts)
	h.json = counting{h.json, p.slow}
	p.ours = h.WithAttrs(with)
	p.theirs = slog.NewJSONHandler(&lineCap{w: p.want}, opts).WithAttrs(with)
	return p
}

func (p pair) check(t *testing.T, r slog.Record) {
	t.Helper()
	p.got.Reset()
	p.want.Reset()
	errOurs := p.ours.Handle(context.Background(), r.Clone())
	errTheirs := p.theirs.Handle(context.Background(), r.Clone())
	if p.got.String() != p.want.String() || (errOurs == nil) != (errTheirs == nil) {
		t.Fatalf("record %q:\n got %s (err %v)\nwant %s (err %v)", r.Message, p.got, errOurs, p.want, errTheirs)
	}
}

type secret struct{}

func (secret) LogValue() slog.Value { return slog.StringValue("masked") }

// TestPlainLinesAreSlogs: every record our handler writes itself is byte
// for byte what slog's JSONHandler (with capValue) writes, and the records
// it cannot write plainly go to that handler.
func TestPlainLinesAreSlogs(t *testing.T) {
	at := time.Date(2026, 11, 23, 14, 5, 6, 789000, time.FixedZone("X", 3600))
	long := strings.Repeat("a", MaxLogValue)
	values := []slog.Value{
		slog.StringValue("plain value <&> 1"), slog.StringValue(""), slog.StringValue(long), slog.StringValue(long + "b"),
		slog.StringValue(`a "quote"`), slog.StringValue(`back\slash`), slog.StringValue("line\nbreak"), slog.StringValue("é"),
		slog.StringValue("\x7f"), slog.StringValue("tab\t"),
		slog.IntValue(0), slog.IntValue(-42), slog.Int64Value(math.MaxInt64), slog.Uint64Value(math.MaxUint64),
		slog.BoolValue(true), slog.BoolValue(false), slog.DurationValue(1500 * time.Millisecond),
		slog.Float64Value(0), slog.Float64Value(1.234), slog.Float64Value(0.001), slog.Float64Value(-7.5),
		slog.Float64Value(1e-6), slog.Float64Value(9.99e-7), slog.Float64Value(1e20), slog.Float64Value(1e21),
		slog.Float64Value(123456789.125), slog.Float64Value(math.NaN()), slog.Float64Value(math.Inf(1)),
		slog.TimeValue(at), slog.AnyValue(errors.New("boom")), slog.AnyValue(map[string]int{"a": 1}),
		slog.AnyValue(secret{}), slog.GroupValue(slog.Int("n", 1)), slog.GroupValue(), {},
	}
	keys := []string{"key", "", `k"ey`, "snake_case.key", "ключ"}
	messages := []string{"request", "", "listening", `say "hi"`, "über", strings.Repeat("m", MaxLogValue+1)}
	levels := []slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, slog.LevelDebug}
	times := []time.Time{at, at.UTC(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), {}, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}

	withs := [][]slog.Attr{
		{slog.String("service", "gateway")},
		{slog.String("service", "gateway"), slog.Int("shard", 3)},
		{slog.String("service", "bad\"name")},
		nil,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, with := range withs {
		p := newPair(with...)
		for i := 0; i < 3000; i++ {
			r := slog.NewRecord(times[rng.IntN(len(times))], levels[rng.IntN(len(levels))], messages[rng.IntN(len(messages))], 0)
			for n := rng.IntN(6); n > 0; n-- {
				r.AddAttrs(slog.Attr{Key: keys[rng.IntN(len(keys))], Value: values[rng.IntN(len(values))]})
			}
			p.check(t, r)
		}
	}

	// The request line is written without the JSONHandler.
	p := newPair(slog.String("service", "gateway"))
	r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("method", "POST"), slog.String("route", "POST /v1/bank/payout/quote"), slog.Int("status", 200),
		slog.String("code", ""), slog.Float64("duration_ms", 0.412), slog.String("key_id", "partner-a"),
		slog.String("request_id", "req_1:2.3-4"), slog.String("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"))
	p.check(t, r)
	want := `{"time":"2026-11-23T14:05:06.000789+01:00","level":"INFO","msg":"request","service":"gateway","method":"POST",` +
		`"route":"POST /v1/bank/payout/quote","status":200,"code":"","duration_ms":0.412,"key_id":"partner-a",` +
		`"request_id":"req_1:2.3-4","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}` + "\n"
	if p.got.String() != want || *p.slow != 0 {
		t.Errorf("request line %s (JSONHandler used %d times), want %s", p.got, *p.slow, want)
	}
	// Through a Logger too (its records carry a PC; no source is written).
	slog.New(p.ours).LogAttrs(context.Background(), slog.LevelInfo, "request", slog.String("code", "rate_limited"))
	if *p.slow != 0 || !strings.HasSuffix(p.got.String(), `"msg":"request","service":"gateway","code":"rate_limited"}`+"\n") {
		t.Errorf("a Logger's line %q (JSONHandler used %d times)", p.got, *p.slow)
	}
	// One value to escape, and the whole record goes the long way.
	r.AddAttrs(slog.String("note", "line\nbreak"))
	p.check(t, r)
	if *p.slow != 1 {
		t.Errorf("a record with a value to escape: JSONHandler used %d times, want 1", *p.slow)
	}
	// So does everything after WithGroup.
	if _, ok := p.ours.WithGroup("g").(*plainJSON); ok {
		t.Error("WithGroup kept the plain handler")
	}
}

// TestALogLineHasACap: a line over MaxLogLine is replaced by one that says
// so; the values that made it long never reach the log.
func TestALogLineHasACap(t *testing.T) {
	var buf bytes.Buffer
	log := Logger(&buf, "gateway")
	attrs := make([]any, 0, 40)
	for i := 0; i < 20; i++ {
		attrs = append(attrs, "k"+strings.Repeat("x", i), strings.Repeat("v", MaxLogValue))
	}
	log.Info("big", attrs...)
	line := buf.String()
	if !strings.Contains(line, `"level":"ERROR","msg":"log line over 4096 bytes replaced"`) || strings.Contains(line, "vvvv") || strings.Count(line, "\n") != 1 {
		t.Errorf("a line over the cap was written as %q", line)
	}
	buf.Reset()
	log.Info("cut", "v", strings.Repeat("é", MaxLogValue))
	if n := len(buf.String()); n > MaxLogValue+200 || !strings.Contains(buf.String(), "…[cut]") {
		t.Errorf("a value over MaxLogValue: %d bytes, %q", n, buf.String())
	}
}

// BenchmarkRequestLine is the gateway's request line through Logger, and
// through slog's JSONHandler alone.
func BenchmarkRequestLine(b *testing.B) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: capValue}
	for _, c := range []struct {
		name string
		log  *slog.Logger
	}{
		{"plain", Logger(io.Discard, "gateway")},
		{"slog", slog.New(slog.NewJSONHandler(&lineCap{w: io.Discard}, opts)).With("service", "gateway")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				c.log.LogAttrs(ctx, slog.LevelInfo, "request",
					slog.String("method", "POST"), slog.String("route", "POST /v1/bank/payout/quote"), slog.Int("status", 200),
					slog.String("code", ""), slog.Float64("duration_ms", 0.412), slog.String("key_id", "partner-a"),
					slog.String("request_id", "req_1:2.3-4"), slog.String("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"))
			}
		})
	}
}
