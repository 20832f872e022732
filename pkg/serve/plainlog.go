package serve

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
)

// plainJSON writes the log lines every request produces (the gateway's and
// each service's request line) without slog's JSONHandler: that one calls
// ReplaceAttr, resolves and escapes every attribute and formats each float
// through encoding/json, about 6 % of the gateway's CPU under load. A record
// whose message, keys and values are all plain (strings of printable ASCII
// with nothing to escape and nothing to cut; integers, booleans, durations,
// floats that JSON writes without an exponent) is written here, byte for byte
// what the JSONHandler would write (TestPlainLinesAreSlogs); any other record,
// and anything after WithGroup, goes to the JSONHandler.
type plainJSON struct {
	json  slog.Handler
	w     *lineCap
	level slog.Leveler
	with  []byte // the With attributes, written
	plain bool   // every With attribute is plain
}

func newPlainJSON(w *lineCap, opts *slog.HandlerOptions) *plainJSON {
	return &plainJSON{json: slog.NewJSONHandler(w, opts), w: w, level: opts.Level, plain: true}
}

func (h *plainJSON) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *plainJSON) WithAttrs(as []slog.Attr) slog.Handler {
	n := &plainJSON{json: h.json.WithAttrs(as), w: h.w, level: h.level, plain: h.plain, with: append([]byte(nil), h.with...)}
	for _, a := range as {
		var ok bool
		if n.with, ok = appendPlainAttr(n.with, a); !ok {
			n.plain = false
		}
	}
	return n
}

func (h *plainJSON) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h *plainJSON) Handle(ctx context.Context, r slog.Record) error {
	if y := r.Time.Year(); !h.plain || r.Time.IsZero() || y < 0 || y >= 10000 || !plainString(r.Message) {
		return h.json.Handle(ctx, r)
	}
	bp := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(bp)
	b := append((*bp)[:0], `{"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, r.Level.String()...)
	b = append(b, `","msg":"`...)
	b = append(b, r.Message...)
	b = append(b, '"')
	b = append(b, h.with...)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		b, ok = appendPlainAttr(b, a)
		return ok
	})
	if !ok {
		return h.json.Handle(ctx, r)
	}
	b = append(b, "}\n"...)
	*bp = b
	_, err := h.w.Write(b)
	return err
}

// appendPlainAttr appends `,"key":value` and reports whether a was plain.
func appendPlainAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if !plainString(a.Key) || a.Key == "" {
		return b, false
	}
	b = append(b, ',', '"')
	b = append(b, a.Key...)
	b = append(b, '"', ':')
	v := a.Value
	switch v.Kind() {
	case slog.KindString:
		if !plainString(v.String()) {
			return b, false
		}
		b = append(b, '"')
		b = append(b, v.String()...)
		return append(b, '"'), true
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), true
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool()), true
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10), true
	case slog.KindFloat64:
		// encoding/json writes 'f' form between 1e-6 and 1e21.
		f := v.Float64()
		if abs := math.Abs(f); math.IsNaN(f) || abs >= 1e21 || abs != 0 && abs < 1e-6 {
			return b, false
		}
		return strconv.AppendFloat(b, f, 'f', -1, 64), true
	}
	return b, false
}

// plainString: at most MaxLogValue bytes, each printable ASCII other than
// `"` and `\`, so JSON writes it as it is and capValue leaves it whole.
func plainString(s string) bool {
	if len(s) > MaxLogValue {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
