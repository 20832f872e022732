package feedwire

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// page is a rendered page of two events, as pkg/events writes one.
func page() []byte {
	b := AppendHeader(nil, 42, true, 2)
	b = AppendEvent(b, 40, 1795996803123456, []byte(`{"id":"evt_40","data":{"note":"a\nb"}}`))
	return AppendEvent(b, 42, 1795996804000000, []byte(`{"id":"evt_42","data":{}}`))
}

// A page reads back as it was written: its place, hasMore, and each
// event's place, time and bytes.
func TestAPageReadsBack(t *testing.T) {
	t.Parallel()
	p, err := Parse(page(), 100)
	if err != nil {
		t.Fatalf("%v\n%s", err, page())
	}
	got := fmt.Sprintf("%d %v", p.Through, p.HasMore)
	for _, e := range p.Events {
		got += fmt.Sprintf(" | %d %d %s", e.Seq, e.CreatedAt, e.JSON)
	}
	if want := `42 true | 40 1795996803123456 {"id":"evt_40","data":{"note":"a\nb"}} | 42 1795996804000000 {"id":"evt_42","data":{}}`; got != want {
		t.Errorf("read back %s\nwant      %s", got, want)
	}
	if p, err := Parse([]byte("7 0 0\n"), 100); err != nil || p.Through != 7 || p.HasMore || len(p.Events) != 0 {
		t.Errorf("an empty page: %+v %v", p, err)
	}
}

// Whatever is not a whole page of at most limit events is refused, never
// read in part.
func TestAPageOutOfShapeIsRefused(t *testing.T) {
	t.Parallel()
	good := page()
	first := bytes.IndexByte(good, '\n')
	cases := map[string][]byte{
		"empty":                 nil,
		"cut short":             good[:len(good)-1],
		"cut in an event":       good[:len(good)/2],
		"trailing bytes":        append(append([]byte{}, good...), 'x'),
		"a count too high":      append([]byte("42 1 3"), good[first:]...),
		"a count too low":       append([]byte("42 1 1"), good[first:]...),
		"hasMore not 0 or 1":    append([]byte("42 2 2"), good[first:]...),
		"a negative place":      append([]byte("-1 1 2"), good[first:]...),
		"not numbers":           append([]byte("42 true 2"), good[first:]...),
		"two spaces":            append([]byte("42  1 2"), good[first:]...),
		"JSON":                  []byte(`{"events":[],"through":0,"hasMore":false}`),
		"a length past the end": []byte("1 0 1\n5 1 999\n{}\n"),
		"not an object":         []byte("1 0 1\n5 1 2\n[]\n"),
		"no newline after":      []byte("1 0 1\n5 1 2\n{}x"),
		"a place of 0":          []byte("1 0 1\n0 1 2\n{}\n"),
		"a number too long":     []byte("12345678901234567890 0 0\n"),
		"a number past int64":   []byte("9999999999999999999 0 0\n"),
		"a plus sign":           []byte("+7 0 0\n"),
	}
	for name, body := range cases {
		if p, err := Parse(body, 100); err == nil {
			t.Errorf("%s: read as %+v", name, p)
		}
	}
	if p, err := Parse(good, 1); err == nil {
		t.Errorf("more events than asked: read as %+v", p)
	}
}

// FuzzParse: no input panics, and whatever is read is framed as a page
// is (each event an object, in bounds).
func FuzzParse(f *testing.F) {
	f.Add(page())
	f.Add([]byte("7 0 0\n"))
	f.Add([]byte("1 0 1\n5 1 2\n{}\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := Parse(body, 100)
		if err != nil {
			return
		}
		for _, e := range p.Events {
			if len(e.JSON) < 2 || e.JSON[0] != '{' || e.JSON[len(e.JSON)-1] != '}' {
				t.Fatalf("read an event out of frame: %q", e.JSON)
			}
		}
	})
}

// An event is written as the partner reads it: id, type, time in seconds
// (UTC), then its data compacted; data that is not JSON is refused.
func TestAnEventIsWrittenAsThePartnerReadsIt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 13, 4, 5, 678_000_000, time.FixedZone("CET", 3600))
	got, err := AppendEventJSON([]byte("x"), "evt_1", "payout.completed", at, []byte(`{ "object": {"status" : "completed"} }`))
	want := `x{"id":"evt_1","type":"payout.completed","createdAt":"2026-11-30T12:04:05Z","data":{"object":{"status":"completed"}}}`
	if err != nil || string(got) != want {
		t.Errorf("got %s (%v)\nwant %s", got, err, want)
	}
	if _, err := AppendEventJSON(nil, "evt_1", "payout.completed", at, []byte(`{"object":`)); err == nil {
		t.Error("data cut short was written")
	}
}
